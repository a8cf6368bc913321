package input

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strconv"
	"strings"
)

// Limits on WARC header size. They keep a corrupt or hostile file from
// making one header consume unbounded memory; real headers are far smaller.
const (
	maxHeaderLine  = 64 << 10
	maxHeaderCount = 256
)

// WARC reads the WARC file at path ("-" for stdin) and yields its HTML
// responses. See WARCReader for what is yielded. Failing to open the file is
// a fatal error.
func WARC(path string, opts Options) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		e := emitter{stats: opts.Stats, yield: yield}
		rc, err := openPath(path)
		if err != nil {
			e.fatal(err)
			return
		}
		defer rc.Close()
		readWARC(path, rc, opts, e)
	}
}

// WARCReader reads a WARC/1.0 or WARC/1.1 stream from r (plain, or gzip
// detected by magic bytes, whether one member per record or one stream) and
// yields one Record per `response` record whose HTTP status is 2xx and whose
// Content-Type is text/html or application/xhtml+xml. Chunked transfer
// coding and gzip content coding are decoded. Other record types and
// non-HTML responses are counted in Options.Stats and skipped.
//
// Every record is accounted for: yielded, counted as skipped, or reported as
// a *BadRecord with its offset; none is dropped or merged into another.
//
// Records are framed by Content-Length, and the framing is checked, because
// a wrong length would otherwise swallow the records after it or cut one
// short. WARC 1.0 and 1.1 end each block with CRLF CRLF, so a record is
// taken as framed right when its block is followed by CRLF CRLF, or by
// another run of CR and LF bytes and then the next version line or the end
// of the input (written by some tools; the length can then only be off by
// line ends). A block followed by anything else is reported as a *BadRecord
// wrapping ErrBadFraming: its Content-Length ran past the record's end or
// stopped short of it. So is a block whose end looks right but which
// contains a WARC record (an empty line, then a version line and a header
// with a Content-Length) whose length, record after record, runs exactly to
// the block's end or past it: the look was a coincidence. Text quoting WARC
// records inside a page is not split: the quoted records are followed by
// more of the page, so they do not reach the block's end. (A block that ends
// with a quoted record lacking its final CRLF CRLF cannot be told apart from
// a length too long by exactly the records it swallowed, and is reported.)
//
// After a framing error reading resumes at the earliest record start found
// inside the misframed block or in the 64 KiB after it whose own framing is
// right or cannot be judged yet; starts before it whose framing is wrong are
// reported too. Swallowed records are read again from the last 1 MiB of the
// block, which is kept for that; a record starting further back cannot be,
// and is reported instead (past the first 1024 such starts in one block,
// they are only counted in the misframed record's report). When no start is
// found, reading resumes at the next line starting with "WARC/1.".
// Re-reading is bounded: over a source, at most as many bytes as the
// decompressed input has, plus 1 MiB.
//
// A record whose WARC header is bad is yielded as a *BadRecord, then reading
// resynchronises at the next line starting with "WARC/1.". A stream that ends
// inside a record is a fatal error naming name and the decompressed offset,
// unless what was read of the block ends with CRLF CRLF: then the input ended
// cleanly after a record whose length is too long, which is a framing error.
// A corrupt gzip stream is a fatal error. name is used only in Record.Source
// and error messages.
func WARCReader(name string, r io.Reader, opts Options) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		readWARC(name, r, opts, emitter{stats: opts.Stats, yield: yield})
	}
}

// openPath opens path, treating "-" as stdin (which is not closed).
func openPath(path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("input: %w", err)
	}
	return f, nil
}

// warcParser holds the state of one pass over a WARC stream.
type warcParser struct {
	name    string
	p       *posReader
	e       emitter
	maxBody int64
	gz      bool

	// pending is a version line found while resynchronising, to be used
	// as the start of the next record.
	pending    []byte
	pendingOff int64
	hasPending bool

	// tail, marks and win are the framing check's buffers, reused from
	// record to record.
	tail  tailRing
	marks markScan
	win   []byte
	// replayed counts the bytes given back to be read again after framing
	// errors; it is kept below the input read so far plus resyncWindow.
	replayed int64
}

func readWARC(name string, r io.Reader, opts Options, e emitter) {
	if w := newWARCParser(name, r, opts, e); w != nil {
		for w.next() {
		}
	}
}

// newWARCParser starts a pass over r. It returns nil after reporting a
// fatal error if r is not readable.
func newWARCParser(name string, r io.Reader, opts Options, e emitter) *warcParser {
	src, gz, err := maybeGunzip(r)
	if err != nil {
		e.fatal(fmt.Errorf("input: %s: offset 0: %w", name, err))
		return nil
	}
	w := &warcParser{name: name, p: newPosReader(src), e: e, maxBody: opts.maxBody(), gz: gz}
	w.tail.size = resyncWindow
	return w
}

// fatalf reports a fatal error at offset and stops the source.
func (w *warcParser) fatalf(off int64, format string, args ...any) bool {
	where := "offset"
	if w.gz {
		where = "decompressed offset"
	}
	w.e.fatal(fmt.Errorf("input: %s: %s %d: %w", w.name, where, off, fmt.Errorf(format, args...)))
	return false
}

func (w *warcParser) bad(off int64, format string, args ...any) bool {
	return w.e.bad(&BadRecord{Source: w.name, Offset: off, Err: fmt.Errorf(format, args...)})
}

func isVersionLine(line []byte) bool {
	return bytes.Equal(line, []byte("WARC/1.0")) || bytes.Equal(line, []byte("WARC/1.1"))
}

// next processes one record. It returns false when the source is finished
// (end of input, fatal error, or the consumer stopped).
func (w *warcParser) next() bool {
	var line []byte
	var start int64
	if w.hasPending {
		line, start, w.hasPending = w.pending, w.pendingOff, false
	} else {
		for {
			start = w.p.pos
			l, long, err := w.p.readLine(maxHeaderLine)
			if err == io.EOF {
				return false
			}
			if err != nil {
				return w.fatalf(start, "reading: %w", err)
			}
			if !long && len(bytes.TrimSpace(l)) == 0 {
				continue // blank lines separate records
			}
			line = l
			break
		}
	}
	if !isVersionLine(bytes.TrimRight(line, " \t")) {
		if !w.bad(start, "bad WARC header: missing WARC/1.0 or WARC/1.1 version line (got %q)", clip(line)) {
			return false
		}
		return w.resync()
	}
	hdr, bad, err := w.readHeader()
	if err != nil {
		return w.fatalf(start, "truncated WARC header: %w", err)
	}
	if bad != "" {
		if !w.bad(start, "bad WARC header: %s", bad) {
			return false
		}
		return w.resync()
	}
	cl, ok := hdr["content-length"]
	if !ok {
		return w.bad(start, "bad WARC header: missing Content-Length") && w.resync()
	}
	n, err := strconv.ParseInt(strings.TrimSpace(cl), 10, 64)
	if err != nil || n < 0 {
		return w.bad(start, "bad WARC header: invalid Content-Length %q", clip([]byte(cl))) && w.resync()
	}
	blk := w.block(n)
	typ := strings.ToLower(strings.TrimSpace(hdr["warc-type"]))
	var out responseOutcome
	if typ == "response" {
		out = w.response(hdr, blk)
	}
	if err := w.drain(blk); err != nil {
		return w.fatalf(start, "%s record: %w", typ, err)
	}
	if blk.remaining() > 0 {
		return w.endOfInput(start, n, typ, blk)
	}
	if framed, cont := w.checkFraming(start, n, blk); !framed {
		return cont
	}
	switch {
	case typ != "response":
		w.e.skip(SkipWARCType + typ)
		return true
	case out.skip != "":
		w.e.skip(out.skip)
		return true
	case out.bad != nil:
		return w.e.bad(&BadRecord{Source: w.name, Offset: start, Err: out.bad})
	}
	return w.e.record(Record{URL: out.url, Body: out.body, Source: w.name, Offset: start})
}

// block starts reading a block of n bytes at the current position.
func (w *warcParser) block(n int64) *blockReader {
	w.tail.reset()
	w.marks.reset(n > resyncWindow)
	return &blockReader{p: w.p, start: w.p.pos, n: n, tail: &w.tail, marks: &w.marks}
}

// drain consumes the rest of a record block. A read error (a corrupt or
// truncated gzip stream) is returned; a clean end of input before the end of
// the block is not, and leaves blk.remaining() > 0.
func (w *warcParser) drain(blk *blockReader) error {
	if _, err := io.Copy(io.Discard, blk); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("truncated input (%w)", err)
		}
		return err
	}
	return nil
}

// readHeader reads "Name: value" lines up to the blank line ending the WARC
// header. Names are lower-cased; folded continuation lines are joined. bad
// describes a malformed header (resync needed); err is an I/O error or EOF
// inside the header (fatal).
func (w *warcParser) readHeader() (hdr map[string]string, bad string, err error) {
	hdr = make(map[string]string)
	last := ""
	for i := 0; ; i++ {
		line, long, err := w.p.readLine(maxHeaderLine)
		if err == io.EOF {
			return nil, "", io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, "", err
		}
		if long {
			return nil, fmt.Sprintf("header line longer than %d bytes", maxHeaderLine), nil
		}
		if len(line) == 0 {
			return hdr, "", nil
		}
		if i >= maxHeaderCount {
			return nil, fmt.Sprintf("more than %d header lines", maxHeaderCount), nil
		}
		if bad := headerField(hdr, &last, line); bad != "" {
			return nil, bad, nil
		}
	}
}

// headerField adds one WARC header line (not empty) to hdr. last is the
// name of the previous field, which a folded continuation line extends. It
// returns a description of a malformed line, or "".
func headerField(hdr map[string]string, last *string, line []byte) string {
	if (line[0] == ' ' || line[0] == '\t') && *last != "" {
		hdr[*last] += " " + strings.TrimSpace(string(line))
		return ""
	}
	k, v, ok := strings.Cut(string(line), ":")
	k = strings.ToLower(strings.TrimSpace(k))
	if !ok || k == "" {
		return fmt.Sprintf("malformed header line %q", clip(line))
	}
	hdr[k] = strings.TrimSpace(v)
	*last = k
	return ""
}

// resync skips lines until one starting with "WARC/1.", which becomes the
// start of the next record. Without resynchronisation one bad header would
// lose the rest of the file.
func (w *warcParser) resync() bool {
	for {
		start := w.p.pos
		line, _, err := w.p.readLine(maxHeaderLine)
		if err == io.EOF {
			return false
		}
		if err != nil {
			return w.fatalf(start, "reading: %w", err)
		}
		if bytes.HasPrefix(line, []byte("WARC/1.")) {
			w.pending, w.pendingOff, w.hasPending = line, start, true
			return true
		}
	}
}

// clip shortens b for error messages.
func clip(b []byte) string {
	const max = 80
	if len(b) > max {
		return string(b[:max]) + "…"
	}
	return string(b)
}
