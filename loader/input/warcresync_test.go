package input

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestWARCFramingBeyondWindow: a Content-Length too long by more than the
// kept end of a block swallows records that cannot be read again. Each is
// reported with its own offset, the records in the kept end are read again,
// and those after are read as usual. Past the bound on remembered starts,
// the rest are counted in the misframed record's report.
func TestWARCFramingBeyondWindow(t *testing.T) {
	for _, tc := range []struct {
		name      string
		size      int // of the swallowed pages
		uncounted bool
	}{
		{"large-records", 20000, false},
		{"more-records-than-remembered", 100, true},
	} {
		recs := [][]byte{page(0, 2000), setLength(page(1, 2000), resyncWindow*3/2)}
		for i, n := 2, 0; n < resyncWindow*3/2+100000; i++ {
			recs = append(recs, page(i, tc.size))
			n += len(recs[i])
		}
		offs := offsets(recs)
		end := offs[1] + int64(headerLen(recs[1])) + int64(len(pageBody(1, 2000))+len(httpResp(200, "text/html", ""))) + resyncWindow*3/2
		base := end - resyncWindow
		var want []string
		var notExamined int
		for i, off := range offs {
			switch {
			case i == 1:
				want = append(want, fmt.Sprintf("bad@%d", off))
			case i > 1 && off < base+3:
				if i-2 >= maxEarlyStarts {
					notExamined++
					continue
				}
				want = append(want, fmt.Sprintf("bad@%d", off))
			default:
				want = append(want, fmt.Sprintf("rec:%s@%d", pageURL(i), off))
			}
		}
		if tc.uncounted != (notExamined > 0) {
			t.Fatalf("%s: %d starts beyond the bound: the test does not test what it says", tc.name, notExamined)
		}
		for _, enc := range encodings(recs) {
			t.Run(tc.name+"/"+enc.name, func(t *testing.T) {
				var st Stats
				r := collect(t, WARCReader("w.warc", bytes.NewReader(enc.data), Options{Stats: &st}))
				if got := yields(r); !slices.Equal(got, want) {
					t.Fatalf("yielded %d values, want %d:\n  %.300q\nwant\n  %.300q", len(got), len(want), got, want)
				}
				msg := r.bad[0].Error()
				if !strings.Contains(msg, "runs past the record end: no CRLF CRLF after the block") {
					t.Errorf("misframed record: %s", msg)
				}
				if more := strconv.Itoa(notExamined) + " more possible record starts"; notExamined > 0 != strings.Contains(msg, more) {
					t.Errorf("misframed record: %s\nwant it to mention %q: %v", msg, more, notExamined > 0)
				}
				for _, b := range r.bad[1:] {
					if !strings.Contains(b.Error(), fmt.Sprintf("inside the block of the misframed record at offset %d, more than %d bytes before that block's end: it cannot be read again", offs[1], resyncWindow)) {
						t.Fatalf("swallowed record: %v", b)
					}
				}
				if n := st.Records + st.Bad + int64(notExamined); n != int64(len(recs)) {
					t.Errorf("%d records accounted for, file has %d", n, len(recs))
				}
			})
		}
	}
}

// TestWARCReplayBounded: input crafted so that each record found inside a
// misframed block is itself misframed and sends the reader back again. Every
// one is reported, the record after them is read, and the bytes read twice
// stay within the input's size plus the window: reading cannot go quadratic.
func TestWARCReplayBounded(t *testing.T) {
	var b bytes.Buffer
	// A record whose block starts with false records, each longer than the
	// bytes the reader looks ahead, then filler: its length (64 KiB) ends
	// in the filler.
	b.WriteString("WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 65536\r\n\r\n")
	var fakes []int64
	for i := range 13 {
		b.WriteString("..\r\n\r\n")
		fakes = append(fakes, int64(b.Len()))
		fmt.Fprintf(&b, "WARC/1.0\r\nContent-Length: %d\r\n\r\n", 140000+i*70000)
	}
	for b.Len() < 2*resyncWindow {
		b.WriteString(strings.Repeat("x", 99) + "\n")
	}
	b.WriteString("\r\n\r\n")
	last := int64(b.Len())
	b.Write(page(7, 1000))
	data := b.Bytes()

	var r result
	var st Stats
	w := newWARCParser("r.warc", bytes.NewReader(data), Options{Stats: &st}, emitter{stats: &st, yield: func(rec Record, err error) bool {
		r.order = append(r.order, "x")
		if err == nil {
			r.recs = append(r.recs, rec)
		} else if br, ok := err.(*BadRecord); ok {
			r.bad = append(r.bad, br)
		} else {
			r.fatal = err
		}
		return true
	}})
	for w.next() {
	}
	if r.fatal != nil || len(r.recs) != 1 || r.recs[0].Offset != last || r.recs[0].URL != pageURL(7) {
		t.Fatalf("records %v, fatal %v", r.recs, r.fatal)
	}
	var got []int64
	notReread := 0
	for _, br := range r.bad {
		got = append(got, br.Offset)
		if strings.Contains(br.Error(), "not read again") {
			notReread++
		}
	}
	if want := append([]int64{0}, fakes...); !slices.Equal(got, want) {
		t.Fatalf("bad records at %v, want %v", got, want)
	}
	if notReread == 0 {
		t.Errorf("no record was left unread: the bound on reading twice was not reached")
	}
	if limit := int64(len(data)) + resyncWindow; w.replayed > limit || w.replayed == 0 {
		t.Errorf("read %d bytes twice, limit %d", w.replayed, limit)
	}
	t.Logf("%d bytes read twice for %d of input; %d records not read again", w.replayed, len(data), notReread)
}

// TestMarkScanChunks: the block scan finds the same record starts however
// the block is cut into reads, and captures the bytes after them.
func TestMarkScanChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("\r\nWARC/1.0x")
	for iter := range 300 {
		data := make([]byte, 200+rng.IntN(400))
		for i := range data {
			data[i] = alphabet[rng.IntN(len(alphabet))]
		}
		for range 3 {
			at := rng.IntN(len(data) - 12)
			copy(data[at:], []string{"\r\n\r\nWARC/1.", "\n\nWARC/1.", "x\nWARC/1."}[rng.IntN(3)])
		}
		var want []int64
		for p := 0; p+len(startMark) <= len(data); p++ {
			if bytes.HasPrefix(data[p:], startMark) && emptyLineBefore(data, p) {
				want = append(want, int64(p+1))
			}
		}
		var s markScan
		s.reset(true)
		for off := 0; off < len(data); {
			n := min(1+rng.IntN(20), len(data)-off)
			if iter%3 == 0 {
				n = 1
			}
			s.feed(int64(off), data[off:off+n])
			off += n
		}
		var got []int64
		for _, st := range s.starts {
			got = append(got, st.off)
			if wantHead := data[st.off:min(len(data), int(st.off)+earlyCapture)]; !bytes.Equal(st.head, wantHead) {
				t.Fatalf("capture at %d: %q, want %q", st.off, st.head, wantHead)
			}
		}
		if !slices.Equal(got, want) || s.count != len(want) {
			t.Fatalf("data %q: found %v (count %d), want %v", data, got, s.count, want)
		}
	}
}

// TestTailRing: the ring keeps the last bytes written, in order, whatever
// the sizes of the writes.
func TestTailRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		r := tailRing{size: 1 + rng.IntN(50)}
		var all []byte
		for range rng.IntN(30) {
			p := make([]byte, rng.IntN(70))
			for i := range p {
				p[i] = byte(rng.IntN(4)) + '0'
			}
			r.write(p)
			all = append(all, p...)
			want := all[max(0, len(all)-r.size):]
			if got := r.appendTo(nil); !bytes.Equal(got, want) {
				t.Fatalf("size %d: kept %q, want %q", r.size, got, want)
			}
			for k := 1; k <= min(4, r.size, len(all)); k++ {
				suffix := slices.Clone(all[len(all)-k:])
				if !r.hasSuffix(suffix) {
					t.Fatalf("size %d, kept %q: no suffix %q", r.size, r.appendTo(nil), suffix)
				}
				suffix[0] = '9' // never written
				if r.hasSuffix(suffix) {
					t.Fatalf("size %d, kept %q: has suffix %q", r.size, r.appendTo(nil), suffix)
				}
			}
			if r.hasSuffix(make([]byte, min(len(all), r.size)+1)) {
				t.Fatalf("hasSuffix of more bytes than kept")
			}
		}
		r.reset()
		if len(r.appendTo(nil)) != 0 {
			t.Fatalf("reset ring keeps bytes")
		}
	}
}
