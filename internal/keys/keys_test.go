package keys

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// tricky holds strings that stress the escaping: empty, zero and 0xFF bytes,
// terminator-like sequences, and strings that are prefixes of each other.
var tricky = []string{
	"", "\x00", "\x00\x00", "\x00\x01", "\x00\xff", "\x01", "\xff", "\xff\xff",
	"a", "a\x00", "a\x00b", "a\x01", "a\xff", "ab", "abc", "b",
}

func TestRoundTripTable(t *testing.T) {
	tss := []uint64{0, 1, 255, 1 << 32, ^uint64(0) - 1, ^uint64(0)}
	for _, g := range []Group{MetaGroup, DefaultGroup, FirstExtraGroup, 0xFF} {
		for _, s := range tricky {
			for _, ts := range tss {
				k := Key{Group: g, Table: s, Row: []byte(s), Family: s, Qualifier: s, Ts: ts}
				got, err := Decode(Encode(k))
				if err != nil {
					t.Fatalf("Decode(Encode(%+v)): %v", k, err)
				}
				if !equal(got, k) {
					t.Fatalf("round trip: got %+v want %+v", got, k)
				}
			}
		}
	}
}

// TestOrderTable sorts every combination of tricky fields both as tuples and
// as encodings and requires the same order.
func TestOrderTable(t *testing.T) {
	var ks []Key
	small := []string{"", "\x00", "\x00\xff", "a", "a\x00", "a\xff", "ab"}
	for _, tb := range small[:4] {
		for _, r := range small {
			for _, f := range small[:4] {
				for _, q := range small {
					for _, ts := range []uint64{0, 7, ^uint64(0)} {
						ks = append(ks, Key{Group: DefaultGroup, Table: tb, Row: []byte(r), Family: f, Qualifier: q, Ts: ts})
					}
				}
			}
		}
	}
	byTuple := slices.Clone(ks)
	slices.SortFunc(byTuple, Compare)
	byBytes := slices.Clone(ks)
	slices.SortFunc(byBytes, func(a, b Key) int { return bytes.Compare(Encode(a), Encode(b)) })
	for i := range byTuple {
		if !equal(byTuple[i], byBytes[i]) {
			t.Fatalf("order differs at %d: tuple %+v bytes %+v", i, byTuple[i], byBytes[i])
		}
	}
}

func TestNewestFirst(t *testing.T) {
	k := Key{Group: DefaultGroup, Table: "t", Row: []byte("r"), Family: "f", Qualifier: "q"}
	older, newer := k, k
	older.Ts, newer.Ts = 5, 6
	if bytes.Compare(Encode(newer), Encode(older)) >= 0 {
		t.Fatal("newer version does not sort first")
	}
}

func TestPrefixes(t *testing.T) {
	for _, s := range tricky {
		for _, o := range tricky {
			k := Key{Group: FirstExtraGroup, Table: s, Row: []byte(o), Family: o, Qualifier: s, Ts: 3}
			enc := Encode(k)
			tp := AppendTablePrefix(nil, k.Group, k.Table)
			rp := AppendRowPrefix(nil, k.Group, k.Table, k.Row)
			cp := AppendColumnPrefix(nil, k.Group, k.Table, k.Row, k.Family, k.Qualifier)
			for _, p := range [][]byte{tp, rp, cp} {
				if !bytes.HasPrefix(enc, p) {
					t.Fatalf("%x is not a prefix of %x", p, enc)
				}
				if succ := PrefixSuccessor(p); bytes.Compare(succ, enc) <= 0 {
					t.Fatalf("successor %x of %x not above %x", succ, p, enc)
				}
			}
			l, err := Parse(enc)
			if err != nil {
				t.Fatal(err)
			}
			if l.TableEnd != len(tp) || l.RowEnd != len(rp) || l.QualifierEnd != len(cp) {
				t.Fatalf("layout %+v disagrees with prefixes %d %d %d", l, len(tp), len(rp), len(cp))
			}
		}
	}
}

func TestPrefixSuccessor(t *testing.T) {
	cases := []struct{ in, want []byte }{
		{nil, nil},
		{[]byte{0xFF, 0xFF}, nil},
		{[]byte{0x01}, []byte{0x02}},
		{[]byte{0x01, 0xFF}, []byte{0x02}},
		{[]byte{0x00, 0x01}, []byte{0x00, 0x02}},
	}
	for _, c := range cases {
		if got := PrefixSuccessor(c.in); !bytes.Equal(got, c.want) {
			t.Errorf("PrefixSuccessor(%x) = %x, want %x", c.in, got, c.want)
		}
	}
}

func TestDecodeMalformed(t *testing.T) {
	good := Encode(Key{Group: DefaultGroup, Table: "t", Row: []byte("r"), Family: "f", Qualifier: "q", Ts: 1})
	bad := [][]byte{
		nil,
		{0x01},
		{0x01, 't', 0x00},             // truncated escape
		{0x01, 't', 0x00, 0x02},       // bad escape
		good[:len(good)-1],            // short timestamp
		append(slices.Clone(good), 0), // trailing byte
	}
	for _, b := range bad {
		if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%x) err = %v, want ErrMalformed", b, err)
		}
	}
}

func equal(a, b Key) bool {
	return a.Group == b.Group && a.Table == b.Table && bytes.Equal(a.Row, b.Row) &&
		a.Family == b.Family && a.Qualifier == b.Qualifier && a.Ts == b.Ts
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

// FuzzCodec checks, for arbitrary pairs of tuples, that encoding round-trips
// and that bytes.Compare of encodings agrees with Compare of tuples. The seeds
// run as ordinary tests under plain `go test`.
func FuzzCodec(f *testing.F) {
	for i, a := range tricky {
		b := tricky[(i+1)%len(tricky)]
		f.Add(byte(1), a, []byte(b), a, b, uint64(i), byte(1), a, []byte(b), a, b, uint64(i+1))
		f.Add(byte(1), "t", []byte(a), "f", "q", uint64(0), byte(1), "t", []byte(b), "f", "q", ^uint64(0))
		f.Add(byte(2), "t", []byte("r"), a, b, uint64(9), byte(2), "t", []byte("r"), b, a, uint64(9))
		f.Add(byte(0), a, []byte(nil), "", "", uint64(0), byte(0xFF), b, []byte{}, "", "", uint64(0))
	}
	f.Fuzz(func(t *testing.T,
		g1 byte, t1 string, r1 []byte, f1, q1 string, ts1 uint64,
		g2 byte, t2 string, r2 []byte, f2, q2 string, ts2 uint64) {
		k1 := Key{Group: Group(g1), Table: t1, Row: r1, Family: f1, Qualifier: q1, Ts: ts1}
		k2 := Key{Group: Group(g2), Table: t2, Row: r2, Family: f2, Qualifier: q2, Ts: ts2}
		e1, e2 := Encode(k1), Encode(k2)
		for _, c := range []struct {
			k Key
			e []byte
		}{{k1, e1}, {k2, e2}} {
			got, err := Decode(c.e)
			if err != nil {
				t.Fatalf("Decode(Encode(%+v)): %v", c.k, err)
			}
			if !equal(got, c.k) {
				t.Fatalf("round trip: got %+v want %+v", got, c.k)
			}
		}
		if got, want := sign(bytes.Compare(e1, e2)), sign(Compare(k1, k2)); got != want {
			t.Fatalf("bytes.Compare=%d tuple Compare=%d for\n%+v\n%+v", got, want, k1, k2)
		}
		// A key lies inside another key's row range iff it is in that row.
		rp := AppendRowPrefix(nil, k1.Group, k1.Table, k1.Row)
		inRange := bytes.Compare(rp, e2) <= 0 && (PrefixSuccessor(rp) == nil || bytes.Compare(e2, PrefixSuccessor(rp)) < 0)
		sameRow := k1.Group == k2.Group && k1.Table == k2.Table && bytes.Equal(k1.Row, k2.Row)
		if inRange != sameRow {
			t.Fatalf("row range of %+v contains %+v: %v, same row: %v", k1, k2, inRange, sameRow)
		}
	})
}

// FuzzDecode checks that Decode never panics and only accepts canonical
// encodings.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x01, 0x00, 0x01})
	f.Add(Encode(Key{Group: 1, Table: "\x00", Row: []byte("\xff"), Family: "a", Qualifier: "", Ts: 42}))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := Decode(b)
		if err != nil {
			return
		}
		if re := Encode(k); !bytes.Equal(re, b) {
			t.Fatalf("Decode(%x) = %+v which encodes to %x", b, k, re)
		}
	})
}

// splitCompare compares a and b as (prefix, suffix) pairs split by Split,
// each part bytewise: the order pebble derives from the store's comparer.
func splitCompare(a, b []byte) int {
	an, bn := Split(a), Split(b)
	if c := bytes.Compare(a[:an], b[:bn]); c != 0 {
		return c
	}
	return bytes.Compare(a[an:], b[bn:])
}

// splitCorpus returns encoded keys, their prefixes at every level, the
// prefixes' successors, truncations and extensions of all of those: the
// kinds of strings pebble sees as keys, bounds, seek targets and separators.
func splitCorpus() [][]byte {
	small := []string{"", "\x00", "\x00\xff", "a", "a\x00", "\xff"}
	var base [][]byte
	for _, g := range []Group{MetaGroup, DefaultGroup, 0xFF} {
		for _, s := range small {
			for _, o := range small[:4] {
				k := Key{Group: g, Table: s, Row: []byte(o), Family: o, Qualifier: s, Ts: uint64(len(s)) << 56}
				enc := Encode(k)
				base = append(base, enc,
					AppendTablePrefix(nil, g, s),
					AppendRowPrefix(nil, g, s, []byte(o)),
					AppendColumnPrefix(nil, g, s, []byte(o), o, s))
			}
		}
	}
	base = append(base, []byte{byte(MetaGroup), 'l', 'a', 'y', 'o', 'u', 't'}, nil, []byte{0xFF, 0xFF})
	var out [][]byte
	for _, b := range base {
		out = append(out, b)
		if s := PrefixSuccessor(b); s != nil {
			out = append(out, s)
		}
		for _, cut := range []int{1, 8, 9} {
			if cut < len(b) {
				out = append(out, b[:len(b)-cut])
			}
		}
		for _, ext := range [][]byte{{0}, {0, 1}, {1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
			out = append(out, append(slices.Clone(b), ext...))
		}
	}
	return out
}

// TestSplit checks that Split cuts encoded keys before their timestamp,
// leaves every other string whole unless it extends a column prefix, and
// that comparing split pairs agrees with bytes.Compare on arbitrary strings
// (which is what pebble requires of a comparer that is bytewise but has a
// Split).
func TestSplit(t *testing.T) {
	for _, s := range tricky {
		for _, o := range tricky {
			k := Key{Group: DefaultGroup, Table: s, Row: []byte(o), Family: o, Qualifier: s, Ts: 77}
			enc := Encode(k)
			if got := Split(enc); got != len(enc)-TsLen {
				t.Fatalf("Split(%x) = %d, want %d", enc, got, len(enc)-TsLen)
			}
			cp := AppendColumnPrefix(nil, k.Group, k.Table, k.Row, k.Family, k.Qualifier)
			if got := Split(cp); got != len(cp) || !IsColumnPrefix(cp) {
				t.Fatalf("Split(column prefix %x) = %d, want %d", cp, got, len(cp))
			}
			rp := AppendRowPrefix(nil, k.Group, k.Table, k.Row)
			if got := Split(rp); got != len(rp) || IsColumnPrefix(rp) {
				t.Fatalf("Split(row prefix %x) = %d, want %d", rp, got, len(rp))
			}
		}
	}
	meta := []byte{byte(MetaGroup), 'l', 'a', 'y', 'o', 'u', 't'}
	if Split(meta) != len(meta) || Split(nil) != 0 {
		t.Fatal("Split of a metadata key or of nil is not the whole key")
	}
	corpus := splitCorpus()
	for _, a := range corpus {
		n := Split(a)
		if n < 0 || n > len(a) {
			t.Fatalf("Split(%x) = %d out of range", a, n)
		}
		// The prefix alone is its own prefix (an empty suffix).
		if Split(a[:n]) != n {
			t.Fatalf("Split(%x) = %d but Split(prefix) = %d", a, n, Split(a[:n]))
		}
		for _, b := range corpus {
			if got, want := splitCompare(a, b), bytes.Compare(a, b); got != want {
				t.Fatalf("split compare(%x, %x) = %d, bytes.Compare = %d", a, b, got, want)
			}
		}
	}
}

// FuzzSplit checks the split order against bytes.Compare on arbitrary
// strings, seeded with strings built around encoded keys.
func FuzzSplit(f *testing.F) {
	corpus := splitCorpus()
	for i := 0; i < len(corpus); i += 7 {
		f.Add(corpus[i], corpus[(i*13+5)%len(corpus)])
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		if got, want := splitCompare(a, b), bytes.Compare(a, b); got != want {
			t.Fatalf("split compare(%x, %x) = %d, bytes.Compare = %d", a, b, got, want)
		}
	})
}

// BenchmarkAppendEncode encodes keys shaped like a web index's (a URL row,
// short family, URL qualifier), none holding a zero byte.
func BenchmarkAppendEncode(b *testing.B) {
	k := Key{Group: DefaultGroup, Table: "pages", Row: []byte("http://en.cppreference.com/w/cpp/container/vector"),
		Family: "in", Qualifier: "http://en.cppreference.com/w/cpp/algorithm/sort", Ts: 1 << 40}
	buf := make([]byte, 0, 256)
	for b.Loop() {
		buf = AppendEncode(buf[:0], k)
	}
}
