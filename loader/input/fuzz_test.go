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
	f.Fuzz(func(t *testing.T, data []byte) {
		var st Stats
		fatals := 0
		for rec, err := range WARCReader("fuzz", bytes.NewReader(data), Options{MaxBody: 4096, Stats: &st}) {
			if fatals > 0 {
				t.Fatal("value after fatal error")
			}
			if err == nil {
				if rec.URL == "" || int64(len(rec.Body)) > 4096 || rec.Offset < 0 {
					t.Fatalf("bad record %+v", rec)
				}
			} else if _, ok := err.(*BadRecord); !ok {
				fatals++
			}
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
