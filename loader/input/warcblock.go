package input

import (
	"bytes"
	"io"
)

// Bounds on what is kept of a WARC block for the framing check. They keep
// memory per source fixed whatever the Content-Length says.
const (
	// resyncWindow is how many of the last bytes of each block are kept.
	// When a Content-Length turns out to be too long, the records it
	// swallowed are read again from these bytes; a record starting further
	// back cannot be, and is reported instead. It also bounds how much input
	// is read twice (see warcParser.replayed).
	resyncWindow = 1 << 20
	// maxEarlyStarts bounds how many possible record starts are remembered
	// in the part of a block that falls out of the window, and earlyCapture
	// how many bytes of each one's header are kept to judge it.
	maxEarlyStarts = 1024
	earlyCapture   = 1 << 10
)

// startMark is the end of an empty line followed by the start of a version
// line: how every WARC record after the first begins, since the previous
// record ends with CRLF CRLF.
var startMark = []byte("\nWARC/1.")

// blockReader reads the block of one WARC record: at most n bytes of the
// stream. As the bytes go by it keeps what the framing check needs: the last
// resyncWindow of them, and where possible record starts were seen.
type blockReader struct {
	p     *posReader
	start int64 // stream offset of the block's first byte
	n     int64 // the declared length
	got   int64 // bytes read so far
	tail  *tailRing
	marks *markScan
}

func (b *blockReader) Read(buf []byte) (int, error) {
	if b.got >= b.n {
		return 0, io.EOF
	}
	if rem := b.n - b.got; int64(len(buf)) > rem {
		buf = buf[:rem]
	}
	k, err := b.p.Read(buf)
	if k > 0 {
		b.marks.feed(b.got, buf[:k])
		b.tail.write(buf[:k])
		b.got += int64(k)
	}
	return k, err
}

// remaining is how many declared bytes have not been read yet.
func (b *blockReader) remaining() int64 { return b.n - b.got }

// tailRing keeps the last size bytes written to it.
type tailRing struct {
	size int
	buf  []byte
	head int // once full, the content in order is buf[head:] then buf[:head]
	full bool
}

func (r *tailRing) reset() { r.buf, r.head, r.full = r.buf[:0], 0, false }

func (r *tailRing) write(p []byte) {
	if !r.full {
		room := r.size - len(r.buf)
		if len(p) <= room {
			r.buf = append(r.buf, p...)
			return
		}
		r.buf = append(r.buf, p[:room]...)
		p = p[room:]
		r.full, r.head = true, 0
	}
	if len(p) >= r.size {
		copy(r.buf, p[len(p)-r.size:])
		r.head = 0
		return
	}
	n := copy(r.buf[r.head:], p)
	copy(r.buf, p[n:])
	r.head = (r.head + len(p)) % r.size
}

// appendTo appends the kept bytes, oldest first, to dst.
func (r *tailRing) appendTo(dst []byte) []byte {
	if !r.full {
		return append(dst, r.buf...)
	}
	return append(append(dst, r.buf[r.head:]...), r.buf[:r.head]...)
}

// hasSuffix reports whether the kept bytes end with s (len(s) <= size).
func (r *tailRing) hasSuffix(s []byte) bool {
	if len(r.buf) < len(s) {
		return false
	}
	if !r.full || r.head >= len(s) {
		end := len(r.buf)
		if r.full {
			end = r.head
		}
		return bytes.Equal(r.buf[end-len(s):end], s)
	}
	k := len(s) - r.head // bytes of s at the end of buf
	return bytes.Equal(r.buf[len(r.buf)-k:], s[:k]) && bytes.Equal(r.buf[:r.head], s[k:])
}

// markScan finds startMark in a block as it streams by. It counts every
// occurrence (so that blocks without one skip the framing analysis) and,
// when capture is set, remembers the first maxEarlyStarts with the header
// bytes that follow them: those are all that will be left of a record
// start that falls out of the tail window.
type markScan struct {
	prev    [16]byte // the last bytes before the current chunk
	nprev   int
	count   int
	capture bool
	starts  []earlyStart
	open    int // starts[open:] still capture
}

// earlyStart is a possible record start seen in a block.
type earlyStart struct {
	off  int64  // block offset of the version line
	head []byte // the block from off on, up to earlyCapture bytes
}

func (s *markScan) reset(capture bool) {
	s.nprev, s.count, s.capture, s.open = 0, 0, capture, 0
	s.starts = s.starts[:0]
}

// feed scans c, the block bytes from block offset off. It looks for the
// version text, whose first byte is rarer in pages than a line end, then
// checks for the empty line before it.
func (s *markScan) feed(off int64, c []byte) {
	if len(c) == 0 {
		return
	}
	ver := startMark[1:]
	// Version texts that begin before c (and end in it), or begin in its
	// first three bytes and need the bytes before c to see the empty line.
	var a [32]byte
	ctx := append(append(a[:0], s.prev[:s.nprev]...), c[:min(len(c), len(ver)+2)]...)
	ctxOff := off - int64(s.nprev)
	for i := max(0, s.nprev-len(ver)+1); ; {
		k := bytes.Index(ctx[i:], ver)
		if k < 0 || i+k >= s.nprev+3 {
			break
		}
		v := i + k
		if v >= 1 && ctx[v-1] == '\n' && emptyLineBefore(ctx, v-1) {
			s.found(ctxOff + int64(v) - 1)
		}
		i = v + 1
	}
	for i := 3; i < len(c); {
		k := bytes.Index(c[i:], ver)
		if k < 0 {
			break
		}
		v := i + k
		if c[v-1] == '\n' && emptyLineBefore(c, v-1) {
			s.found(off + int64(v) - 1)
		}
		i = v + 1
	}
	for i := s.open; i < len(s.starts); i++ {
		st := &s.starts[i]
		from := st.off + int64(len(st.head)) - off
		take := min(int64(len(c))-from, int64(earlyCapture-len(st.head)))
		st.head = append(st.head, c[from:from+take]...)
	}
	for s.open < len(s.starts) && len(s.starts[s.open].head) == earlyCapture {
		s.open++
	}
	if len(c) >= len(s.prev) {
		s.nprev = copy(s.prev[:], c[len(c)-len(s.prev):])
	} else {
		keep := min(s.nprev, len(s.prev)-len(c))
		copy(s.prev[:], s.prev[s.nprev-keep:s.nprev])
		s.nprev = keep + copy(s.prev[keep:], c)
	}
}

// found records a mark at block offset at. Its capture goes on from the
// end of the mark, which is in the chunk being scanned.
func (s *markScan) found(at int64) {
	s.count++
	if !s.capture || len(s.starts) >= maxEarlyStarts {
		return
	}
	head := make([]byte, 0, earlyCapture)
	head = append(head, startMark[1:]...)
	s.starts = append(s.starts, earlyStart{off: at + 1, head: head})
}

// emptyLineBefore reports whether b[p] (a '\n') ends an empty line: the
// line before the one starting at p+1 is empty.
func emptyLineBefore(b []byte, p int) bool {
	switch {
	case p >= 1 && b[p-1] == '\n':
		return true
	case p >= 2 && b[p-1] == '\r' && b[p-2] == '\n':
		return true
	}
	return false
}
