package input

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// This file checks that each WARC record ends where its Content-Length says;
// warcresync.go reports those that do not and finds where the next record
// really starts. See WARCReader for the rule.

var crlfcrlf = []byte("\r\n\r\n")

// afterBlock classifies the bytes that follow a block.
type afterBlock int

const (
	// afterTrailer: CRLF CRLF, as WARC 1.0 and 1.1 require.
	afterTrailer afterBlock = iota
	// afterLineEnds: another run of CR and LF bytes (possibly none), then a
	// version line or the end of the bytes at hand. Some writers end records
	// this way (one CRLF, bare LFs, a length off by a line end); the block
	// can then only be off by line-end bytes, so it is accepted.
	afterLineEnds
	// afterWrong: anything else. The Content-Length is wrong.
	afterWrong
)

// judgeAfter classifies b, the bytes after a block; open says whether more
// bytes may follow b.
func judgeAfter(b []byte, open bool) afterBlock {
	if bytes.HasPrefix(b, crlfcrlf) {
		return afterTrailer
	}
	if rest := bytes.TrimLeft(b, "\r\n"); len(rest) == 0 || startsVersion(rest, open) {
		return afterLineEnds
	}
	return afterWrong
}

// startsVersion reports whether b begins with a WARC/1.0 or WARC/1.1 version
// line, as next accepts it. When open (b may be cut short), a b without a
// line end that could still become one counts too.
func startsVersion(b []byte, open bool) bool {
	line, _, found := bytes.Cut(b, []byte("\n"))
	if !found && open {
		t := bytes.TrimRight(line, " \t\r")
		return bytes.HasPrefix([]byte("WARC/1.0"), t) || bytes.HasPrefix([]byte("WARC/1.1"), t)
	}
	return isVersionLine(bytes.TrimRight(bytes.TrimSuffix(line, []byte("\r")), " \t"))
}

// garbageAfter reports whether what follows the trailer (or run of line
// ends) in b is something other than a version line.
func garbageAfter(b []byte, open bool) bool {
	rest := bytes.TrimLeft(b, "\r\n")
	return len(rest) > 0 && !startsVersion(rest, open)
}

// cand is a possible record start: an empty line, then a version line and a
// WARC header with a valid Content-Length.
type cand struct {
	off    int64 // stream offset of the version line
	hdrLen int   // length of the header, version line and empty line included
	cl     int64 // its Content-Length
	cut    bool  // the header runs past the bytes at hand: hdrLen and cl unknown
}

func (c *cand) blockEnd() int64 { return c.off + int64(c.hdrLen) + c.cl }

// parseCandidate reads the WARC header at the start of b as readHeader
// would. ok is false if b does not start with one.
func parseCandidate(b []byte) (c cand, ok bool) {
	hdr := make(map[string]string)
	last := ""
	i := 0
	for n := -1; ; n++ {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return cand{cut: true}, len(b)-i <= maxHeaderLine
		}
		line := bytes.TrimSuffix(b[i:i+j], []byte("\r"))
		i += j + 1
		if len(line) > maxHeaderLine {
			return cand{}, false
		}
		if n < 0 {
			if !isVersionLine(bytes.TrimRight(line, " \t")) {
				return cand{}, false
			}
			continue
		}
		if len(line) == 0 {
			break
		}
		if n >= maxHeaderCount || headerField(hdr, &last, line) != "" {
			return cand{}, false
		}
	}
	cl, ok := hdr["content-length"]
	if !ok {
		return cand{}, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(cl), 10, 64)
	if err != nil || v < 0 {
		return cand{}, false
	}
	return cand{hdrLen: i, cl: v}, true
}

// frameWin is what the framing analysis looks at: the kept end of a block
// and the bytes after it, with the possible record starts in them and
// before them.
type frameWin struct {
	b     []byte
	base  int64 // stream offset of b[0]
	end   int64 // stream offset where the block ended
	open  bool  // more input may follow b
	cands []cand
	// early is how many of cands start before b (from the block's early
	// starts); uncounted is how many more such starts were not remembered,
	// all after earlyLast, the offset of the last one remembered.
	early     int
	uncounted int
	earlyLast int64
}

// window gathers the frameWin of the block just read.
func (w *warcParser) window(blk *blockReader) *frameWin {
	b := blk.tail.appendTo(w.win[:0])
	tailLen := len(b)
	f := &frameWin{end: blk.start + blk.got}
	f.base = f.end - int64(tailLen)
	after, err := w.p.peek(w.p.br.Size())
	b = append(b, after...)
	w.win = b
	f.b, f.open = b, err == nil

	// Marks in b need two bytes before them to show the empty line; those
	// in its first two bytes are the block scan's.
	inBlock := 0
	var here []cand
	for i := 2; i < len(b); {
		k := bytes.Index(b[i:], startMark)
		if k < 0 {
			break
		}
		p := i + k
		i = p + 1
		if !emptyLineBefore(b, p) {
			continue
		}
		if p+len(startMark) <= tailLen {
			inBlock++
		}
		if c, ok := parseCandidate(b[p+1:]); ok {
			c.off = f.base + int64(p) + 1
			here = append(here, c)
		}
	}
	before := 0
	for _, s := range blk.marks.starts {
		off := blk.start + s.off
		if off >= f.base+3 {
			break
		}
		before++
		f.earlyLast = off
		if c, ok := parseCandidate(s.head); ok {
			c.off = off
			f.cands = append(f.cands, c)
		}
	}
	f.early = len(f.cands)
	f.uncounted = max(0, blk.marks.count-inBlock-before)
	f.cands = append(f.cands, here...)
	return f
}

// find returns the index of the candidate at stream offset off, or -1.
func (f *frameWin) find(off int64) int {
	i := sort.Search(len(f.cands), func(i int) bool { return f.cands[i].off >= off })
	if i < len(f.cands) && f.cands[i].off == off {
		return i
	}
	return -1
}

// link is what follows a candidate's block.
type link int

const (
	linkBroken  link = iota // no CRLF CRLF and no tolerated line ends: its length is wrong
	linkNext                // CRLF CRLF, then the candidate step returns
	linkFramed              // CRLF CRLF, then a version line or the end of the input
	linkLoose               // tolerated line ends (see afterLineEnds)
	linkGarbage             // CRLF CRLF, then bytes that start no record
	linkUnknown             // its end is beyond the bytes at hand
)

// step says whether the record starting at c ends where its length says,
// and which candidate follows it directly.
func (f *frameWin) step(c *cand) (link, int) {
	if c.cut {
		return linkUnknown, -1
	}
	q := c.blockEnd()
	if q < f.base {
		// Gone already: only a start seen right after a trailer links it.
		if j := f.find(q + 4); j >= 0 {
			return linkNext, j
		}
		if f.uncounted > 0 && q+4 > f.earlyLast {
			return linkUnknown, -1 // among the starts not remembered
		}
		return linkBroken, -1
	}
	bEnd := f.base + int64(len(f.b))
	switch {
	case q > bEnd && !f.open:
		return linkBroken, -1 // it runs past the end of the input
	case q > bEnd || (q == bEnd && f.open):
		return linkUnknown, -1
	}
	rest := f.b[q-f.base:]
	switch judgeAfter(rest, f.open) {
	case afterWrong:
		return linkBroken, -1
	case afterLineEnds:
		return linkLoose, -1
	}
	if j := f.find(q + 4); j >= 0 {
		return linkNext, j
	}
	if garbageAfter(rest[4:], f.open) {
		return linkGarbage, -1
	}
	return linkFramed, -1
}

// detect looks, in a block whose end looked right, for a record that starts
// inside it and runs, record by record, exactly to the block's end or past
// it: then the block's own length is too long and the look of its end was a
// coincidence. garbage says whether bytes that start no record follow the
// block's trailer, which is what a block ending inside a record leaves. It
// returns the index of the earliest such record, or -1.
//
// Text that merely looks like WARC records inside a page (a tutorial quoting
// one) does not trigger it: a quoted record is followed by more page, so its
// chain breaks before the block's end.
func (f *frameWin) detect(garbage bool) int {
	reach := make([]bool, len(f.cands))
	for i := len(f.cands) - 1; i >= 0; i-- {
		c := &f.cands[i]
		if c.cut || c.off >= f.end {
			continue
		}
		q := c.blockEnd()
		l, j := f.step(c)
		switch {
		case q == f.end:
			reach[i] = true // its trailer is the one after the block
		case q > f.end:
			reach[i] = l == linkNext || l == linkFramed || (l == linkUnknown && garbage)
		default:
			reach[i] = l == linkNext && (f.cands[j].off >= f.end || reach[j])
		}
	}
	for i := range f.cands {
		if f.cands[i].off >= f.end {
			break
		}
		if reach[i] {
			return i
		}
	}
	return -1
}

// checkFraming checks the record at start (Content-Length cl), whose block
// was read in full. framed reports a record that ends where its length
// says; otherwise it was reported and the reader moved to the next record,
// and cont says whether the source goes on.
func (w *warcParser) checkFraming(start, cl int64, blk *blockReader) (framed, cont bool) {
	after, err := w.p.peek(64)
	open := err == nil
	if judgeAfter(after, open) == afterWrong {
		f := w.window(blk)
		return false, w.misframed(start, cl, blk, f, "no CRLF CRLF after the block", false, 0)
	}
	if blk.marks.count == 0 {
		return true, true
	}
	f := w.window(blk)
	i := f.detect(garbageAfter(bytes.TrimPrefix(after, crlfcrlf), open))
	if i < 0 {
		return true, true
	}
	why := fmt.Sprintf("a WARC record starts inside the block at offset %d and runs to or past its declared end", f.cands[i].off)
	return false, w.misframed(start, cl, blk, f, why, true, i)
}
