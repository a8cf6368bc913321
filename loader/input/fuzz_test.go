package input

import (
	"bytes"
	"strings"
	"testing"
)

func FuzzWARC(f *testing.F) {
	recs, _, _ := sampleWARC("1.1")
	plain := bytes.Join(recs, nil)
	f.Add(plain)
	f.Add(gzEach(recs))
	f.Add(gz(plain))
	f.Add(plain[:len(plain)/2])
	f.Add([]byte("WARC/1.0\r\nContent-Length: 5\r\n\r\nab"))
	f.Add([]byte("WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: x\r\nContent-Length: 40\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nff\r\n"))
	// Misframed records: too long, too short, too long by exactly the next
	// record, every record too long; a page quoting records; line ends
	// other than CRLF CRLF.
	three := pages(3, 200)
	for _, mis := range [][][]byte{
		{three[0], setLength(three[1], 60), three[2]},
		{setLength(three[0], -30), three[1], three[2]},
		{three[0], setLength(three[1], len(three[2])), three[2]},
		{setLength(three[0], 500), setLength(three[1], 500), setLength(three[2], 500)},
	} {
		f.Add(bytes.Join(mis, nil))
		f.Add(gzEach(mis))
	}
	f.Add(bytes.Join([][]byte{three[0], warcRec("1.0", "response", "http://q/", httpResp(200, "text/html", "<pre>\r\n\r\n"+string(three[1])+"</pre>")), three[2]}, nil))
	f.Add([]byte("WARC/1.0\nContent-Length: 2\n\nab\nWARC/1.0\r\nContent-Length: 1\r\n\r\nc"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var st Stats
		var recs, bad, fatals int64
		last := int64(-1)
		for rec, err := range WARCReader("fuzz", bytes.NewReader(data), Options{MaxBody: 4096, Stats: &st}) {
			if fatals > 0 {
				t.Fatal("value after fatal error")
			}
			off := rec.Offset
			if err == nil {
				recs++
				if rec.URL == "" || int64(len(rec.Body)) > 4096 || rec.Offset < 0 {
					t.Fatalf("bad record %+v", rec)
				}
			} else if b, ok := err.(*BadRecord); ok {
				bad++
				off = b.Offset
			} else {
				fatals++
				continue
			}
			// Each record is yielded or reported once, in input order.
			if off <= last || off > int64(len(data))*1000+64 {
				t.Fatalf("offset %d after %d (%v)", off, last, err)
			}
			last = off
		}
		if st.Records != recs || st.Bad != bad || st.Fatal != fatals {
			t.Fatalf("stats %+v, counted %d records %d bad %d fatal", st, recs, bad, fatals)
		}
	})
}

func FuzzJSONL(f *testing.F) {
	f.Add([]byte(`{"url":"http://a/","html":"x"}` + "\n\n" + `{"url":"b","delete":true}`))
	f.Add([]byte(`{"url":1}` + "\n" + `{`))
	f.Add(gz([]byte(`{"url":"http://a/","html":"x"}`)))
	f.Add([]byte(`{"url":"u","html":"` + strings.Repeat("a", 300) + `"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for rec, err := range JSONL("fuzz", bytes.NewReader(data), Options{MaxBody: 256}) {
			if err == nil && (rec.URL == "" || rec.Line < 1 || len(rec.Body) > 256 || rec.Delete == (rec.Body != nil)) {
				t.Fatalf("bad record %+v", rec)
			}
		}
	})
}
