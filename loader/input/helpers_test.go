package input

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"iter"
	"strings"
	"testing"
)

// result collects everything an iterator yielded.
type result struct {
	recs  []Record
	bad   []*BadRecord
	fatal error
	order []string // "rec:URL", "bad", "fatal" in yield order
}

func collect(t *testing.T, seq iter.Seq2[Record, error]) result {
	t.Helper()
	var r result
	for rec, err := range seq {
		if r.fatal != nil {
			t.Fatalf("value yielded after fatal error %v", r.fatal)
		}
		var b *BadRecord
		switch {
		case err == nil:
			r.recs = append(r.recs, rec)
			r.order = append(r.order, "rec:"+rec.URL)
		case errors.As(err, &b):
			r.bad = append(r.bad, b)
			r.order = append(r.order, "bad")
		default:
			r.fatal = err
			r.order = append(r.order, "fatal")
		}
	}
	return r
}

func httpResp(status int, ctype string, body string, extra ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d X\r\n", status)
	if ctype != "" {
		fmt.Fprintf(&b, "Content-Type: %s\r\n", ctype)
	}
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	return b.Bytes()
}

func warcRec(version, typ, uri string, block []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "WARC/%s\r\n", version)
	fmt.Fprintf(&b, "WARC-Type: %s\r\n", typ)
	if uri != "" {
		fmt.Fprintf(&b, "WARC-Target-URI: %s\r\n", uri)
	}
	b.WriteString("WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-000000000000>\r\n")
	b.WriteString("WARC-Date: 2024-01-01T00:00:00Z\r\n")
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(block))
	b.Write(block)
	b.WriteString("\r\n\r\n")
	return b.Bytes()
}

func gz(b []byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func gzEach(recs [][]byte) []byte {
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	for _, r := range recs {
		w.Write(r)
		w.Close()
		w.Reset(&out)
	}
	return out.Bytes()
}

func chunk(s string, size int) string {
	var b strings.Builder
	for len(s) > 0 {
		n := min(size, len(s))
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, s[:n])
		s = s[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}
