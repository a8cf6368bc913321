// Package input reads web-index loader inputs (directories of HTML files,
// WARC archives and JSON Lines feeds) and yields them as Records.
//
// The package only reads: it never writes, never follows network links and
// does not judge whether a body is really HTML (the HTML parser downstream
// does that). Every source is an iter.Seq2[Record, error]. A non-nil error is
// either a *BadRecord, meaning one input record was unusable and was skipped
// (iteration continues with the next record), or any other error, which is
// fatal for that source: it is the last value the iterator yields.
//
// Sources that wrap an io.Reader (WARCReader, JSONL) can be iterated only
// once, because the reader is consumed. Sources that take a path (Dir, WARC,
// File) reopen the path on every iteration.
package input

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxBody is the body size limit used when Options.MaxBody is zero. It
// bounds the memory one record can take.
const DefaultMaxBody = 10 << 20

// Record is one page (or page deletion) read from an input.
type Record struct {
	// URL identifies the page. It is never empty.
	URL string
	// Body is the raw page content (HTML, but not verified). Nil for deletes.
	Body []byte
	// Delete reports that the page should be removed rather than upserted.
	Delete bool
	// Source names the input the record came from (a path, or the name given
	// to a reader-based source; "-" for stdin).
	Source string
	// Offset is the byte offset where the record starts, for error reports
	// and resuming. For WARC and JSONL it is an offset in the decompressed
	// stream (equal to the raw offset for uncompressed input). It is -1 when
	// there is no meaningful offset (Dir).
	Offset int64
	// Line is the 1-based line number for JSONL records, 0 otherwise.
	Line int
}

// ErrTooLarge is wrapped by BadRecord.Err when a body (or a JSONL line)
// exceeds Options.MaxBody. Callers can detect it with errors.Is.
var ErrTooLarge = errors.New("body too large")

// ErrSymlinkSkipped is wrapped by BadRecord.Err when Dir meets a symbolic
// link. Links are never followed, to avoid cycles and escaping the root, but
// they are reported so that the omission is visible.
var ErrSymlinkSkipped = errors.New("symlink skipped")

// ErrBadFraming is wrapped by BadRecord.Err when a WARC record's
// Content-Length does not match where the record really ends, and when a
// record swallowed by such a length could not be read again. Callers can
// detect it with errors.Is.
var ErrBadFraming = errors.New("bad WARC framing")

// BadRecord describes one unusable input record. The iterator that yields it
// has already skipped past the record and continues with the next one, so a
// caller typically logs it, counts it and keeps going.
type BadRecord struct {
	// Source names the input, as in Record.Source.
	Source string
	// Offset is the byte offset of the bad record (see Record.Offset), or -1.
	Offset int64
	// Line is the 1-based line number for JSONL, 0 otherwise.
	Line int
	// Err says what was wrong.
	Err error
}

// Error names the source, the position and the problem.
func (b *BadRecord) Error() string {
	switch {
	case b.Line > 0:
		return fmt.Sprintf("input: %s: line %d: %v", b.Source, b.Line, b.Err)
	case b.Offset >= 0:
		return fmt.Sprintf("input: %s: offset %d: %v", b.Source, b.Offset, b.Err)
	default:
		return fmt.Sprintf("input: %s: %v", b.Source, b.Err)
	}
}

// Unwrap returns Err so that errors.Is(err, ErrTooLarge) works.
func (b *BadRecord) Unwrap() error { return b.Err }

// Skip reasons used as Stats.Skipped keys. Reasons that carry a detail (the
// WARC-Type, the media type, …) are the prefix followed by the detail, e.g.
// "warc-type:request" or "content-type:image/png".
const (
	SkipWARCType        = "warc-type:"        // non-response WARC record
	SkipContentType     = "content-type:"     // response that is not HTML
	SkipHTTPStatus      = "http-status:"      // response with a non-2xx status
	SkipContentEncoding = "content-encoding:" // payload encoding we cannot decode
	SkipNonHTMLFile     = "non-html-file"     // Dir: regular file without .html/.htm
	SkipNonRegularFile  = "non-regular-file"  // Dir: device, socket, pipe…
)

// Stats counts what a source did, so that a loader can report how much of
// its input was used. It is updated by the iterator as it runs, from the
// goroutine that ranges over it; read it after (or between) iteration steps,
// not concurrently. One Stats may be shared by several sources run one after
// another to get totals.
type Stats struct {
	// Records is the number of Records yielded (including deletions).
	Records int64
	// Deletes is the number of yielded Records with Delete set.
	Deletes int64
	// Bad is the number of *BadRecord errors yielded.
	Bad int64
	// Skipped counts records deliberately ignored (not errors), by reason.
	// Keys are the Skip* constants, possibly with a detail suffix.
	Skipped map[string]int64
	// Fatal is the number of fatal errors yielded (at most one per source run).
	Fatal int64
}

// SkippedTotal sums Skipped over all reasons.
func (s *Stats) SkippedTotal() int64 {
	var n int64
	for _, v := range s.Skipped {
		n += v
	}
	return n
}

func (s *Stats) skip(reason string) {
	if s == nil {
		return
	}
	if s.Skipped == nil {
		s.Skipped = make(map[string]int64)
	}
	s.Skipped[reason]++
}

// Options configure every source. The zero value is usable.
type Options struct {
	// MaxBody is the largest body accepted, in bytes; larger bodies are
	// reported as a BadRecord wrapping ErrTooLarge. Zero means
	// DefaultMaxBody.
	MaxBody int64
	// Stats, if non-nil, is updated as the iterator runs.
	Stats *Stats
}

func (o Options) maxBody() int64 {
	if o.MaxBody <= 0 {
		return DefaultMaxBody
	}
	return o.MaxBody
}

// emitter wraps yield with Stats bookkeeping so that sources cannot forget
// to count.
type emitter struct {
	stats *Stats
	yield func(Record, error) bool
}

func (e emitter) record(r Record) bool {
	if e.stats != nil {
		e.stats.Records++
		if r.Delete {
			e.stats.Deletes++
		}
	}
	return e.yield(r, nil)
}

func (e emitter) bad(b *BadRecord) bool {
	if e.stats != nil {
		e.stats.Bad++
	}
	return e.yield(Record{}, b)
}

func (e emitter) fatal(err error) {
	if e.stats != nil {
		e.stats.Fatal++
	}
	e.yield(Record{}, err)
}

func (e emitter) skip(reason string) { e.stats.skip(reason) }

// posReader is a buffered reader that tracks how many bytes were consumed,
// giving record offsets without a second counting layer. Bytes can be given
// back (unread) so that a WARC record found inside the block of a misframed
// one is read again from its start.
type posReader struct {
	br  *bufio.Reader
	pos int64
	// front holds bytes given back by unread; they are read before br.
	front []byte
}

func newPosReader(r io.Reader) *posReader {
	if br, ok := r.(*bufio.Reader); ok {
		return &posReader{br: br}
	}
	return &posReader{br: bufio.NewReaderSize(r, 64<<10)}
}

func (p *posReader) Read(b []byte) (int, error) {
	if len(p.front) > 0 {
		n := copy(b, p.front)
		p.front = p.front[n:]
		p.pos += int64(n)
		return n, nil
	}
	n, err := p.br.Read(b)
	p.pos += int64(n)
	return n, err
}

// reached is the stream offset of the furthest byte ever read: what was
// given back still counts as read.
func (p *posReader) reached() int64 { return p.pos + int64(len(p.front)) }

// unread gives b back: the next reads return b, then what followed. b must
// be the bytes just before the current position; it is copied.
func (p *posReader) unread(b []byte) {
	front := make([]byte, 0, len(b)+len(p.front))
	p.front = append(append(front, b...), p.front...)
	p.pos -= int64(len(b))
}

// peek returns up to n of the next bytes without consuming them (fewer at
// the end of the input or when n exceeds the buffer). The error is the one
// that stopped it short, io.EOF at the end of the input.
func (p *posReader) peek(n int) ([]byte, error) {
	if len(p.front) >= n {
		return p.front[:n], nil
	}
	rest, err := p.br.Peek(min(n-len(p.front), p.br.Size()))
	if len(p.front) == 0 {
		return rest, err
	}
	out := make([]byte, 0, len(p.front)+len(rest))
	return append(append(out, p.front...), rest...), err
}

// discard consumes n bytes (fewer at the end of the input).
func (p *posReader) discard(n int64) {
	if k := min(n, int64(len(p.front))); k > 0 {
		p.front = p.front[k:]
		p.pos += k
		n -= k
	}
	for n > 0 {
		k, err := p.br.Discard(int(min(n, 1<<30)))
		p.pos += int64(k)
		n -= int64(k)
		if err != nil {
			return
		}
	}
}

// slice returns the next piece of input up to and including '\n', like
// bufio.Reader.ReadSlice, serving given-back bytes first. A piece that ends
// without '\n' before more input is reported with bufio.ErrBufferFull.
func (p *posReader) slice() ([]byte, error) {
	if len(p.front) == 0 {
		return p.br.ReadSlice('\n')
	}
	n := len(p.front)
	if i := bytes.IndexByte(p.front, '\n'); i >= 0 {
		n = i + 1
	}
	frag := p.front[:n]
	p.front = p.front[n:]
	if frag[len(frag)-1] != '\n' {
		return frag, bufio.ErrBufferFull
	}
	return frag, nil
}

// readLine consumes the next line, including its terminating '\n' (the last
// line may lack one). It returns at most max bytes of the line with the line
// terminator removed, and long=true if the line had more (the rest is
// consumed and dropped, so huge lines never sit in memory). It returns io.EOF
// only when no byte at all was left.
func (p *posReader) readLine(max int) (line []byte, long bool, err error) {
	total := 0
	for {
		frag, err := p.slice()
		p.pos += int64(len(frag))
		total += len(frag)
		if !long {
			if room := max - len(line); len(frag) > room {
				line = append(line, frag[:room]...)
				long = true
			} else {
				line = append(line, frag...)
			}
		}
		switch {
		case err == nil:
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && total > 0:
		default:
			return nil, false, err
		}
		if !long {
			line = bytes.TrimSuffix(line, []byte("\n"))
			line = bytes.TrimSuffix(line, []byte("\r"))
		}
		return line, long, nil
	}
}

// maybeGunzip returns a reader of the decompressed content when r starts
// with the gzip magic bytes, and a buffered reader of r otherwise. Detection
// is by content, not by name, because files are often misnamed and stdin has
// no name. Multi-member streams (one gzip member per WARC record) and single
// streams are both handled since gzip.Reader reads members back to back.
func maybeGunzip(r io.Reader) (io.Reader, bool, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(2)
	if err != nil && err != io.EOF {
		return nil, false, err
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, true, fmt.Errorf("gzip header: %w", err)
		}
		return zr, true, nil
	}
	return br, false, nil
}
