package input

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func sampleWARC(version string) (recs [][]byte, wantURLs []string, wantBodies []string) {
	big := strings.Repeat("<p>chunked</p>", 50)
	recs = [][]byte{
		warcRec(version, "warcinfo", "", []byte("software: test\r\n")),
		warcRec(version, "request", "http://a.example/", []byte("GET / HTTP/1.1\r\nHost: a.example\r\n\r\n")),
		warcRec(version, "response", "http://a.example/", httpResp(200, "text/html; charset=utf-8", "<html>A</html>")),
		warcRec(version, "metadata", "http://a.example/", []byte("via: x\r\n")),
		warcRec(version, "response", "http://a.example/logo.png", httpResp(200, "image/png", "\x89PNG")),
		warcRec(version, "response", "http://a.example/missing", httpResp(404, "text/html", "<html>404</html>")),
		warcRec(version, "response", "<http://b.example/x>", httpResp(200, "application/xhtml+xml", "<html>B</html>")),
		warcRec(version, "response", "http://c.example/", httpResp(200, "TEXT/HTML", chunk(big, 100), "Transfer-Encoding: chunked")),
		warcRec(version, "revisit", "http://a.example/", httpResp(200, "text/html", "")),
		warcRec(version, "response", "http://d.example/", httpResp(200, "text/html", string(gz([]byte("<html>D</html>"))), "Content-Encoding: gzip")),
		warcRec(version, "resource", "file:///x", []byte("<html>res</html>")),
	}
	return recs, []string{"http://a.example/", "http://b.example/x", "http://c.example/", "http://d.example/"},
		[]string{"<html>A</html>", "<html>B</html>", big, "<html>D</html>"}
}

func TestWARCFormats(t *testing.T) {
	for _, version := range []string{"1.0", "1.1"} {
		recs, urls, bodies := sampleWARC(version)
		plain := bytes.Join(recs, nil)
		for _, tc := range []struct {
			name string
			data []byte
		}{
			{"plain", plain},
			{"gzip-per-record", gzEach(recs)},
			{"gzip-single", gz(plain)},
		} {
			t.Run(version+"/"+tc.name, func(t *testing.T) {
				var st Stats
				r := collect(t, WARCReader("t.warc", bytes.NewReader(tc.data), Options{Stats: &st}))
				if r.fatal != nil || len(r.bad) != 0 {
					t.Fatalf("fatal=%v bad=%v", r.fatal, r.bad)
				}
				var gotURLs, gotBodies []string
				for _, rec := range r.recs {
					gotURLs = append(gotURLs, rec.URL)
					gotBodies = append(gotBodies, string(rec.Body))
					if rec.Source != "t.warc" || rec.Line != 0 || rec.Delete {
						t.Errorf("bad record fields %+v", rec)
					}
					// Offsets are in the decompressed stream: they point at the version line.
					if !bytes.HasPrefix(plain[rec.Offset:], []byte("WARC/"+version+"\r\nWARC-Type: response")) {
						t.Errorf("offset %d of %s does not point at its record", rec.Offset, rec.URL)
					}
				}
				if !slices.Equal(gotURLs, urls) || !slices.Equal(gotBodies, bodies) {
					t.Errorf("got urls %q, want %q; bodies equal=%v", gotURLs, urls, slices.Equal(gotBodies, bodies))
				}
				want := map[string]int64{
					"warc-type:warcinfo": 1, "warc-type:request": 1, "warc-type:metadata": 1,
					"warc-type:revisit": 1, "warc-type:resource": 1,
					"content-type:image/png": 1, "http-status:404": 1,
				}
				if !mapsEqual(st.Skipped, want) || st.Records != 4 || st.Bad != 0 {
					t.Errorf("stats %+v, want skipped %v", st, want)
				}
			})
		}
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestWARCBadHeaderResync(t *testing.T) {
	good1 := warcRec("1.1", "response", "http://one/", httpResp(200, "text/html", "1"))
	noLen := []byte("WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: http://bad/\r\n\r\n" + string(httpResp(200, "text/html", "bad")) + "\r\n\r\n")
	badLen := bytes.Replace(warcRec("1.0", "response", "http://bad2/", httpResp(200, "text/html", "x")), []byte("Content-Length: "), []byte("Content-Length: -"), 1)
	garbage := []byte("this is not a WARC record\r\nat all\r\n")
	badLine := []byte("WARC/1.0\r\nno colon here\r\n\r\n")
	good2 := warcRec("1.0", "response", "http://two/", httpResp(200, "text/html", "2"))
	data := bytes.Join([][]byte{good1, garbage, noLen, badLen, badLine, good2}, nil)
	var st Stats
	r := collect(t, WARCReader("mid.warc", bytes.NewReader(data), Options{Stats: &st}))
	if r.fatal != nil {
		t.Fatal(r.fatal)
	}
	want := []string{"rec:http://one/", "bad", "bad", "bad", "bad", "rec:http://two/"}
	if !slices.Equal(r.order, want) {
		t.Fatalf("order %q, want %q (bad: %v)", r.order, want, r.bad)
	}
	for i, sub := range []string{"missing WARC/1.0 or WARC/1.1", "missing Content-Length", "invalid Content-Length", "malformed header line"} {
		msg := r.bad[i].Error()
		if !strings.Contains(msg, sub) || !strings.Contains(msg, "mid.warc: offset ") {
			t.Errorf("bad[%d] = %q, want it to mention %q", i, msg, sub)
		}
	}
	if r.bad[0].Offset != int64(len(good1)) {
		t.Errorf("bad offset %d, want %d", r.bad[0].Offset, len(good1))
	}
	if r.bad[1].Offset != int64(len(good1)+len(garbage)) {
		t.Errorf("resynced record offset %d, want %d", r.bad[1].Offset, len(good1)+len(garbage))
	}
	if st.Bad != 4 || st.Records != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestWARCTruncated(t *testing.T) {
	recs := [][]byte{
		warcRec("1.1", "response", "http://one/", httpResp(200, "text/html", "1")),
		warcRec("1.1", "response", "http://two/", httpResp(200, "text/html", "2")),
		warcRec("1.1", "response", "http://three/", httpResp(200, "text/html", strings.Repeat("3", 5000))),
	}
	plainOff := int64(len(recs[0]) + len(recs[1]))
	perRecord := gzEach(recs)
	single := gz(bytes.Join(recs, nil))
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"gzip-per-record", perRecord[:len(perRecord)-20]},
		{"gzip-single", single[:len(single)-20]},
		{"gzip-cut-in-header", perRecord[:len(perRecord)-len(gz(recs[2]))+5]},
		{"plain", bytes.Join(recs, nil)[:plainOff+200]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st Stats
			r := collect(t, WARCReader("cut.warc.gz", bytes.NewReader(tc.data), Options{Stats: &st}))
			if !slices.Equal(r.order, []string{"rec:http://one/", "rec:http://two/", "fatal"}) {
				t.Fatalf("order %q, fatal %v", r.order, r.fatal)
			}
			msg := r.fatal.Error()
			if !strings.Contains(msg, "cut.warc.gz") || !strings.Contains(msg, "offset") {
				t.Errorf("fatal error %q does not name file and offset", msg)
			}
			if tc.name != "gzip-cut-in-header" && !strings.Contains(msg, "offset "+strconv.FormatInt(plainOff, 10)) {
				t.Errorf("fatal error %q does not name record offset %d", msg, plainOff)
			}
			if st.Fatal != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestWARCTooLarge(t *testing.T) {
	big := strings.Repeat("x", 1000)
	data := bytes.Join([][]byte{
		warcRec("1.1", "response", "http://big/", httpResp(200, "text/html", big)),
		warcRec("1.1", "response", "http://bigchunked/", httpResp(200, "text/html", chunk(big, 64), "Transfer-Encoding: chunked")),
		warcRec("1.1", "response", "http://bigpng/", httpResp(200, "image/png", big)),
		warcRec("1.1", "response", "http://small/", httpResp(200, "text/html", "ok")),
		warcRec("1.1", "response", "http://badchunk/", httpResp(200, "text/html", "zz\r\nnope", "Transfer-Encoding: chunked")),
		warcRec("1.1", "response", "", httpResp(200, "text/html", "no uri")),
		warcRec("1.1", "response", "http://badhttp/", []byte("not http\r\n\r\n")),
		warcRec("1.1", "response", "http://small2/", httpResp(200, "text/html", "ok2")),
	}, nil)
	var st Stats
	r := collect(t, WARCReader("big.warc", bytes.NewReader(data), Options{MaxBody: 100, Stats: &st}))
	want := []string{"bad", "bad", "rec:http://small/", "bad", "bad", "bad", "rec:http://small2/"}
	if !slices.Equal(r.order, want) {
		t.Fatalf("order %q, want %q; bad %v", r.order, want, r.bad)
	}
	for i := range 2 {
		if !errors.Is(r.bad[i], ErrTooLarge) || !strings.Contains(r.bad[i].Error(), "body too large") {
			t.Errorf("bad[%d] = %v, want too large", i, r.bad[i])
		}
	}
	for i, sub := range []string{"chunked", "WARC-Target-URI", "status line"} {
		if !strings.Contains(r.bad[2+i].Error(), sub) {
			t.Errorf("bad[%d] = %v, want %q", 2+i, r.bad[2+i], sub)
		}
	}
	if st.Skipped["content-type:image/png"] != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestWARCEmptyAndStop(t *testing.T) {
	r := collect(t, WARCReader("empty", bytes.NewReader(nil), Options{}))
	if len(r.order) != 0 {
		t.Errorf("empty input yielded %q", r.order)
	}
	recs, _, _ := sampleWARC("1.1")
	n := 0
	for range WARCReader("x", bytes.NewReader(bytes.Join(recs, nil)), Options{}) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("break did not stop iteration")
	}
}

func TestWARCFileAndOpen(t *testing.T) {
	dir := t.TempDir()
	recs, urls, _ := sampleWARC("1.0")
	// Misnamed on purpose: detection is by content.
	warcPath := filepath.Join(dir, "data.bin")
	os.WriteFile(warcPath, gzEach(recs), 0o644)
	jsonPath := filepath.Join(dir, "feed.jsonl")
	os.WriteFile(jsonPath, []byte(`{"url":"http://j/","delete":true}`+"\n"), 0o644)
	emptyJSON := filepath.Join(dir, "empty.json")
	os.WriteFile(emptyJSON, nil, 0o644)
	unknown := filepath.Join(dir, "x.txt")
	os.WriteFile(unknown, []byte("hello"), 0o644)

	r := collect(t, WARC(warcPath, Options{}))
	if r.fatal != nil || len(r.recs) != len(urls) || r.recs[0].Source != warcPath {
		t.Errorf("WARC(path): %+v", r)
	}
	r = collect(t, File(warcPath, Options{}))
	if r.fatal != nil || len(r.recs) != len(urls) {
		t.Errorf("File(warc): %+v", r)
	}
	r = collect(t, File(jsonPath, Options{}))
	if r.fatal != nil || len(r.recs) != 1 || !r.recs[0].Delete {
		t.Errorf("File(jsonl): %+v", r)
	}
	if _, f, err := Open(emptyJSON); err != nil || f != FormatJSONL {
		t.Errorf("Open(empty.json) = %v, %v", f, err)
	}
	r = collect(t, File(unknown, Options{}))
	if r.fatal == nil || !strings.Contains(r.fatal.Error(), "unknown format") {
		t.Errorf("File(unknown): %+v", r)
	}
	r = collect(t, WARC(filepath.Join(dir, "nope.warc"), Options{}))
	if r.fatal == nil || !strings.Contains(r.fatal.Error(), "nope.warc") {
		t.Errorf("missing file: %+v", r)
	}
}

// BenchmarkWARCReader reads a file of HTML responses with the request and
// metadata records a crawler writes next to them.
func BenchmarkWARCReader(b *testing.B) {
	var recs [][]byte
	for i := range 300 {
		url := fmt.Sprintf("http://bench%d.example/", i)
		body := fmt.Sprintf("<html><title>%d</title>", i) + strings.Repeat("<p>Some text of a page, long enough to look real.</p>\n", 40*(1+i%10))
		recs = append(recs,
			warcRec("1.1", "request", url, []byte("GET / HTTP/1.1\r\nHost: bench.example\r\n\r\n")),
			warcRec("1.1", "response", url, httpResp(200, "text/html; charset=utf-8", body)),
			warcRec("1.1", "metadata", url, []byte("fetchTimeMs: 120\r\n")))
	}
	plain := bytes.Join(recs, nil)
	for _, enc := range []struct {
		name string
		data []byte
	}{{"plain", plain}, {"gzip-per-record", gzEach(recs)}} {
		b.Run(enc.name, func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				for _, err := range WARCReader("bench.warc", bytes.NewReader(enc.data), Options{}) {
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n != 300 {
					b.Fatalf("%d records", n)
				}
			}
		})
	}
}
