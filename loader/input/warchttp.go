package input

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"mime"
	"net/http/httputil"
	"strconv"
	"strings"
)

// Limits on the HTTP response head inside a WARC block.
const (
	maxHTTPLine    = 64 << 10
	maxHTTPHeaders = 256
)

// responseOutcome is what one WARC response record turned into: exactly one
// of a page (url+body), a skip reason, or a bad-record error.
type responseOutcome struct {
	url  string
	body []byte
	skip string
	bad  error
}

// response interprets a WARC response block as an HTTP response. It reads
// from block but leaves draining (and truncation and framing checks) to the
// caller, so a truncated input is reported as fatal rather than as a bad
// record, and a misframed one as a framing error.
func (w *warcParser) response(hdr map[string]string, block *blockReader) responseOutcome {
	uri := strings.TrimSpace(hdr["warc-target-uri"])
	uri = strings.TrimSuffix(strings.TrimPrefix(uri, "<"), ">")
	if uri == "" {
		return responseOutcome{bad: fmt.Errorf("response record without WARC-Target-URI")}
	}
	br := bufio.NewReaderSize(block, 16<<10)
	status, h, err := readHTTPHead(&posReader{br: br})
	if err != nil {
		return responseOutcome{bad: fmt.Errorf("bad HTTP response head: %w", err)}
	}
	if status < 200 || status > 299 {
		return responseOutcome{skip: SkipHTTPStatus + strconv.Itoa(status)}
	}
	ct := h["content-type"]
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt, _, _ = strings.Cut(ct, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
	}
	if mt != "text/html" && mt != "application/xhtml+xml" {
		if mt == "" {
			mt = "none"
		}
		return responseOutcome{skip: SkipContentType + mt}
	}
	enc := strings.ToLower(strings.TrimSpace(h["content-encoding"]))
	if enc != "" && enc != "identity" && enc != "gzip" && enc != "x-gzip" {
		return responseOutcome{skip: SkipContentEncoding + enc}
	}
	chunked := false
	for te := range strings.SplitSeq(h["transfer-encoding"], ",") {
		if strings.EqualFold(strings.TrimSpace(te), "chunked") {
			chunked = true
		}
	}
	var body io.Reader = br
	if !chunked && (enc == "" || enc == "identity") {
		// The size is known: refuse without reading anything.
		if n := int64(br.Buffered()) + block.remaining(); n > w.maxBody {
			return responseOutcome{bad: fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, n, w.maxBody)}
		}
	}
	if chunked {
		body = httputil.NewChunkedReader(body)
	}
	if enc == "gzip" || enc == "x-gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			return responseOutcome{bad: fmt.Errorf("bad gzip content coding: %w", err)}
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, w.maxBody+1))
	if err != nil {
		return responseOutcome{bad: fmt.Errorf("bad HTTP body (chunked=%v, encoding=%q): %w", chunked, enc, err)}
	}
	if int64(len(b)) > w.maxBody {
		return responseOutcome{bad: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, w.maxBody)}
	}
	return responseOutcome{url: uri, body: b}
}

// readHTTPHead parses an HTTP/1.x (or HTTP/2 as written by some crawlers)
// status line and header fields up to the blank line. Header names are
// lower-cased; repeated fields are joined with ", " as HTTP allows.
func readHTTPHead(p *posReader) (status int, hdr map[string]string, err error) {
	line, long, err := p.readLine(maxHTTPLine)
	if err != nil || long {
		return 0, nil, fmt.Errorf("missing status line")
	}
	proto, rest, _ := strings.Cut(string(line), " ")
	if !strings.HasPrefix(proto, "HTTP/") {
		return 0, nil, fmt.Errorf("bad status line %q", clip(line))
	}
	code, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
	status, err = strconv.Atoi(code)
	if err != nil || len(code) != 3 {
		return 0, nil, fmt.Errorf("bad status code in %q", clip(line))
	}
	hdr = make(map[string]string)
	for i := 0; ; i++ {
		line, long, err := p.readLine(maxHTTPLine)
		if err != nil {
			return 0, nil, fmt.Errorf("header not terminated by an empty line")
		}
		if long {
			return 0, nil, fmt.Errorf("header line longer than %d bytes", maxHTTPLine)
		}
		if len(line) == 0 {
			return status, hdr, nil
		}
		if i >= maxHTTPHeaders {
			return 0, nil, fmt.Errorf("more than %d header lines", maxHTTPHeaders)
		}
		k, v, ok := strings.Cut(string(line), ":")
		if !ok {
			continue // tolerate junk lines; real-world servers send them
		}
		k = strings.ToLower(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		if old, dup := hdr[k]; dup {
			v = old + ", " + v
		}
		hdr[k] = v
	}
}
