package input

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func pageURL(i int) string { return fmt.Sprintf("http://p%d.example/", i) }

// pageBody is the HTML of page i, about size bytes long.
func pageBody(i, size int) string {
	return fmt.Sprintf("<html><title>P%d</title>\n", i) + strings.Repeat(fmt.Sprintf("<p>page %d</p>\n", i), size/14) + "</html>\n"
}

// page is a response record for page i with a body of about size bytes.
func page(i, size int) []byte {
	return warcRec("1.1", "response", pageURL(i), httpResp(200, "text/html", pageBody(i, size)))
}

func pages(n, size int) [][]byte {
	var recs [][]byte
	for i := range n {
		recs = append(recs, page(i, size))
	}
	return recs
}

// setLength returns rec with its WARC Content-Length changed by delta.
func setLength(rec []byte, delta int) []byte {
	const key = "Content-Length: "
	i := bytes.Index(rec, []byte(key)) + len(key)
	j := i + bytes.IndexByte(rec[i:], '\r')
	n, err := strconv.Atoi(string(rec[i:j]))
	if err != nil {
		panic(err)
	}
	return slices.Concat(rec[:i], []byte(strconv.Itoa(n+delta)), rec[j:])
}

// headerLen is the length of rec's WARC header, empty line included.
func headerLen(rec []byte) int { return bytes.Index(rec, crlfcrlf) + 4 }

func offsets(recs [][]byte) []int64 {
	offs := make([]int64, len(recs))
	for i := 1; i < len(recs); i++ {
		offs[i] = offs[i-1] + int64(len(recs[i-1]))
	}
	return offs
}

// encodings are the three ways a WARC file comes.
func encodings(recs [][]byte) []struct {
	name string
	data []byte
} {
	plain := bytes.Join(recs, nil)
	return []struct {
		name string
		data []byte
	}{{"plain", plain}, {"gzip-per-record", gzEach(recs)}, {"gzip-single", gz(plain)}}
}

// yields renders what a source yielded as "rec:URL@offset" and "bad@offset".
func yields(r result) []string {
	var out []string
	ri, bi := 0, 0
	for _, o := range r.order {
		switch o {
		case "bad":
			out = append(out, fmt.Sprintf("bad@%d", r.bad[bi].Offset))
			bi++
		case "fatal":
			out = append(out, "fatal: "+r.fatal.Error())
		default:
			out = append(out, fmt.Sprintf("rec:%s@%d", r.recs[ri].URL, r.recs[ri].Offset))
			ri++
		}
	}
	return out
}

// TestWARCFraming reads files in which one record's (or every record's)
// Content-Length is wrong, at the start, in the middle and at the end, in
// every encoding. The misframed record is reported with its offset, every
// other record is yielded or counted as skipped, and nothing else happens.
func TestWARCFraming(t *testing.T) {
	five := pages(5, 2000)
	off5 := offsets(five)
	with := func(k, delta int) [][]byte {
		recs := slices.Clone(five)
		recs[k] = setLength(recs[k], delta)
		return recs
	}
	request := warcRec("1.1", "request", "http://p1.example/", []byte("GET / HTTP/1.1\r\nHost: p1.example\r\n\r\n"))
	small := pages(5, 100)
	var allLong [][]byte
	for _, r := range small {
		allLong = append(allLong, setLength(r, 500))
	}
	bigShort := slices.Clone(five)
	bigShort[1] = setLength(page(1, 150000), -100000)
	h2 := headerLen(five[2])
	httpHead := bytes.Index(five[2][h2:], crlfcrlf)

	for _, tc := range []struct {
		name    string
		recs    [][]byte
		want    []string // "rec:i" or "bad:i" (i indexes recs)
		msgs    map[int][]string
		skipped int64
	}{
		{name: "long/start", recs: with(0, 500),
			want: []string{"bad:0", "rec:1", "rec:2", "rec:3", "rec:4"},
			msgs: map[int][]string{0: {"Content-Length", "runs past the record end: no CRLF CRLF after the block; next record found at offset " + strconv.FormatInt(off5[1], 10)}}},
		{name: "long/middle", recs: with(2, 500),
			want: []string{"rec:0", "rec:1", "bad:2", "rec:3", "rec:4"},
			msgs: map[int][]string{2: {"runs past the record end: no CRLF CRLF after the block; next record found at offset $3"}}},
		{name: "long/end", recs: with(4, 500),
			want: []string{"rec:0", "rec:1", "rec:2", "rec:3", "bad:4"},
			msgs: map[int][]string{4: {"runs past the record end: the input ends", "after a CRLF CRLF", "no record start found between offset", "the end of the input"}}},
		{name: "short/start", recs: with(0, -50),
			want: []string{"bad:0", "rec:1", "rec:2", "rec:3", "rec:4"},
			msgs: map[int][]string{0: {"stops short of the record end: no CRLF CRLF after the block; next record found at offset $1"}}},
		{name: "short/middle", recs: with(2, -50),
			want: []string{"rec:0", "rec:1", "bad:2", "rec:3", "rec:4"},
			msgs: map[int][]string{2: {"stops short of the record end", "next record found at offset $3"}}},
		{name: "short/end", recs: with(4, -50),
			want: []string{"rec:0", "rec:1", "rec:2", "rec:3", "bad:4"},
			msgs: map[int][]string{4: {"does not match the record end: no CRLF CRLF after the block; no record start found", "the end of the input"}}},
		{name: "long/swallows-a-whole-record", recs: [][]byte{five[0], setLength(five[1], 500), request, five[3], five[4]},
			want:    []string{"rec:0", "bad:1", "rec:3", "rec:4"},
			msgs:    map[int][]string{1: {"runs past the record end", "next record found at offset $2"}},
			skipped: 1},
		{name: "long/end-on-next-header-end", recs: with(1, h2),
			want: []string{"rec:0", "bad:1", "rec:2", "rec:3", "rec:4"},
			msgs: map[int][]string{1: {"runs past the record end: a WARC record starts inside the block at offset $2"}}},
		{name: "long/end-on-next-http-head-end", recs: with(1, 4+h2+httpHead),
			want: []string{"rec:0", "bad:1", "rec:2", "rec:3", "rec:4"},
			msgs: map[int][]string{1: {"a WARC record starts inside the block at offset $2", "next record found at offset $2"}}},
		{name: "long/end-on-next-trailer", recs: with(1, len(five[2])),
			want: []string{"rec:0", "bad:1", "rec:2", "rec:3", "rec:4"},
			msgs: map[int][]string{1: {"a WARC record starts inside the block at offset $2"}}},
		{name: "long/every-record", recs: allLong,
			want: []string{"bad:0", "bad:1", "bad:2", "bad:3", "bad:4"},
			msgs: map[int][]string{
				0: {"runs past the record end", "next record found at offset $1"},
				1: {"runs past the record end", "next record found at offset $2"},
				3: {"runs past the record end", "next record found at offset $4"},
				4: {"runs past the record end"},
			}},
		{name: "short/beyond-lookahead", recs: bigShort,
			want: []string{"rec:0", "bad:1", "rec:2", "rec:3", "rec:4"},
			msgs: map[int][]string{1: {"does not match the record end: no CRLF CRLF after the block; no record start found between offsets", "reading resumes at the next WARC/1.x line"}}},
	} {
		offs := offsets(tc.recs)
		var want []string
		for _, w := range tc.want {
			kind, i, _ := strings.Cut(w, ":")
			k, _ := strconv.Atoi(i)
			if kind == "bad" {
				want = append(want, fmt.Sprintf("bad@%d", offs[k]))
			} else {
				want = append(want, fmt.Sprintf("rec:%s@%d", pageURL(k), offs[k]))
			}
		}
		for _, enc := range encodings(tc.recs) {
			t.Run(tc.name+"/"+enc.name, func(t *testing.T) {
				var st Stats
				r := collect(t, WARCReader("f.warc", bytes.NewReader(enc.data), Options{Stats: &st}))
				got := yields(r)
				if !slices.Equal(got, want) {
					t.Fatalf("yielded\n  %q\nwant\n  %q\nbad: %v", got, want, r.bad)
				}
				for i, rec := range r.recs {
					k := slices.Index(offs, rec.Offset)
					if !strings.Contains(string(rec.Body), fmt.Sprintf("<title>P%d</title>", k)) || !strings.HasSuffix(string(rec.Body), "</html>\n") {
						t.Errorf("record %d (%s) has a damaged body of %d bytes", i, rec.URL, len(rec.Body))
					}
				}
				for _, b := range r.bad {
					k := slices.Index(offs, b.Offset)
					if !errors.Is(b, ErrBadFraming) || !strings.HasPrefix(b.Error(), fmt.Sprintf("input: f.warc: offset %d: bad WARC framing: ", b.Offset)) {
						t.Errorf("bad record %v: want ErrBadFraming naming file and offset", b)
					}
					for _, sub := range tc.msgs[k] {
						for j := len(offs) - 1; j >= 0; j-- {
							sub = strings.ReplaceAll(sub, "$"+strconv.Itoa(j), strconv.FormatInt(offs[j], 10))
						}
						if !strings.Contains(b.Error(), sub) {
							t.Errorf("bad record at %d:\n  %v\nwant it to contain %q", b.Offset, b, sub)
						}
					}
				}
				if st.Records != int64(len(r.recs)) || st.Bad != int64(len(r.bad)) || st.Fatal != 0 || st.SkippedTotal() != tc.skipped {
					t.Errorf("stats %+v, want %d records, %d bad, %d skipped", st, len(r.recs), len(r.bad), tc.skipped)
				}
				if n := st.Records + st.Bad + st.SkippedTotal(); n != int64(len(tc.recs)) {
					t.Errorf("%d records accounted for, file has %d", n, len(tc.recs))
				}
			})
		}
	}
}

// TestWARCQuotedRecordsIntact: pages that quote WARC records (an empty line,
// a version line, a header with a Content-Length) are loaded whole, wherever
// they are in the file: only a misframed record makes the reader look for
// records inside a block.
func TestWARCQuotedRecordsIntact(t *testing.T) {
	quoted := string(warcRec("1.0", "response", "http://quoted.example/", httpResp(200, "text/html", "<p>quoted</p>")))
	bodies := []string{
		// A whole quoted record, followed by more of the page.
		"<html><pre>\r\n\r\n" + quoted + "</pre><p>that was a record</p></html>\n",
		// The body starts with a record (the HTTP head's empty line precedes it).
		quoted + "<p>and some HTML</p>\n",
		// A quoted header whose length runs far past the page.
		"<html><pre>\r\n\r\nWARC/1.0\r\nWARC-Type: response\r\nContent-Length: 99999\r\n\r\nHTTP/1.1 200 OK\r\n</pre></html>\r\n",
		// One whose length runs a little past the page, into what follows.
		"<html><pre>\r\n\r\nWARC/1.1\r\nWARC-Type: request\r\nContent-Length: 40\r\n\r\nGET / HTTP/1.1</pre></html>\r\n",
		// One whose length stops inside the page.
		"<pre>\n\nWARC/1.1\nWARC-Type: metadata\nContent-Length: 3\n\nabcdef</pre>\n",
	}
	for _, pos := range []int{0, 2, 4} {
		for bi, body := range bodies {
			recs := pages(5, 2000)
			recs[pos] = warcRec("1.1", "response", pageURL(pos), httpResp(200, "text/html", body))
			for _, enc := range encodings(recs) {
				t.Run(fmt.Sprintf("page%d/body%d/%s", pos, bi, enc.name), func(t *testing.T) {
					var st Stats
					r := collect(t, WARCReader("q.warc", bytes.NewReader(enc.data), Options{Stats: &st}))
					if r.fatal != nil || len(r.bad) != 0 || len(r.recs) != 5 {
						t.Fatalf("yielded %q: %v %v", yields(r), r.bad, r.fatal)
					}
					for i, rec := range r.recs {
						want := pageBody(i, 2000)
						if i == pos {
							want = body
						}
						if rec.URL != pageURL(i) || string(rec.Body) != want {
							t.Errorf("record %d: %s, body of %d bytes, want %s with %d bytes", i, rec.URL, len(rec.Body), pageURL(i), len(want))
						}
					}
				})
			}
		}
	}
}

// TestWARCToleratedEndings: records that end with line ends other than the
// standard CRLF CRLF (one CRLF, bare LFs, none, a length covering some of
// them) are loaded, as long as the next record's version line or the end of
// the input follows: the length can then only be off by line ends.
func TestWARCToleratedEndings(t *testing.T) {
	rec := func(i int, trailer string, extra int) []byte {
		r := page(i, 300)
		return append(setLength(r[:len(r)-4], extra), trailer...)
	}
	lfOnly := func(i int) []byte {
		body := fmt.Sprintf("<html>P%d</html>\n", i)
		block := "HTTP/1.1 200 OK\nContent-Type: text/html\n\n" + body
		return fmt.Appendf(nil, "WARC/1.0\nWARC-Type: response\nWARC-Target-URI: %s\nContent-Length: %d\n\n%s\n\n", pageURL(i), len(block), block)
	}
	for _, tc := range []struct {
		name string
		rec  func(i int) []byte
		tail string // what each body ends with beyond the page
	}{
		{"lf-lf", func(i int) []byte { return rec(i, "\n\n", 0) }, ""},
		{"one-crlf", func(i int) []byte { return rec(i, "\r\n", 0) }, ""},
		{"none", func(i int) []byte { return rec(i, "", 0) }, ""},
		{"crlf-counted-in-length", func(i int) []byte { return rec(i, "\r\n", 2) }, "\r\n"},
		{"length-one-too-long", func(i int) []byte { return rec(i, "\r\n\r\n", 1) }, "\r"},
		{"extra-empty-lines", func(i int) []byte { return rec(i, "\r\n\r\n\r\n\r\n", 0) }, ""},
		{"lf-only-file", lfOnly, ""},
	} {
		var recs [][]byte
		for i := range 4 {
			recs = append(recs, tc.rec(i))
		}
		for _, enc := range encodings(recs) {
			t.Run(tc.name+"/"+enc.name, func(t *testing.T) {
				var st Stats
				r := collect(t, WARCReader("t.warc", bytes.NewReader(enc.data), Options{Stats: &st}))
				if r.fatal != nil || len(r.bad) != 0 || len(r.recs) != 4 {
					t.Fatalf("yielded %q: %v %v", yields(r), r.bad, r.fatal)
				}
				for i, rec := range r.recs {
					want := pageBody(i, 300) + tc.tail
					if tc.name == "lf-only-file" {
						want = fmt.Sprintf("<html>P%d</html>\n", i)
					}
					if rec.URL != pageURL(i) || string(rec.Body) != want {
						t.Errorf("record %d: %s %q", i, rec.URL, clip(rec.Body))
					}
				}
			})
		}
	}
}
