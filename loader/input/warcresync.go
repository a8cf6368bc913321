package input

import "fmt"

// walked is a record start passed over after a framing error.
type walked struct {
	i       int  // index in frameWin.cands
	damaged bool // its own framing is wrong; otherwise it is not read again
}

// walk goes through the starts in the window from cands[from] on. Each
// one's framing is checked from the bytes at hand, so a run of misframed
// records is reported without reading anything twice; reading resumes at
// the first one that is (or may be) framed right, unless reading it again
// from there would take more than canReplay allows. resume is -1 if no
// start qualifies.
func (f *frameWin) walk(from int, canReplay func(n int64) bool) (passed []walked, resume int) {
	for i := max(from, f.early); i < len(f.cands); i++ {
		c := &f.cands[i]
		if l, _ := f.step(c); l == linkBroken {
			passed = append(passed, walked{i, true})
			continue
		}
		if c.off < f.end && !canReplay(f.end-c.off) {
			passed = append(passed, walked{i, false})
			continue
		}
		return passed, i
	}
	return passed, -1
}

// lost returns the starts from cands[from] on that fell out of the window
// and whose records lead, length by length, into it: records swallowed by
// a too long Content-Length that cannot be read again. Starts whose chain
// breaks are taken for text inside the block.
func (f *frameWin) lost(from int) []int {
	trusted := make([]bool, f.early)
	for i := f.early - 1; i >= 0; i-- {
		c := &f.cands[i]
		if c.cut || c.blockEnd() >= f.base {
			trusted[i] = true
			continue
		}
		l, j := f.step(c)
		trusted[i] = l == linkUnknown || (l == linkNext && (j >= f.early || trusted[j]))
	}
	var out []int
	for i := from; i < f.early; i++ {
		if trusted[i] {
			out = append(out, i)
		}
	}
	return out
}

// misframed reports the record at start (Content-Length cl), whose block
// was just read and does not end where the record does, then reports the
// records lost or damaged with it and positions the reader at the next
// record. why says what was wrong, and past whether it shows the length to
// be too long; from is the first candidate that may be the next record
// (what detect found, or 0). It returns false if the source is finished.
func (w *warcParser) misframed(start, cl int64, blk *blockReader, f *frameWin, why string, past bool, from int) bool {
	passed, resume := f.walk(from, func(n int64) bool {
		return w.replayed+n <= w.p.reached()+resyncWindow
	})
	declaredEnd := blk.start + cl
	// A block too short has the starts before the window inside it.
	short := !past && resume >= 0 && f.cands[resume].off > declaredEnd
	var lost []int
	if !short {
		lost = f.lost(from)
	}

	next := func(k int) int64 { // offset of what follows passed[k]
		if k+1 < len(passed) {
			return f.cands[passed[k+1].i].off
		}
		if resume >= 0 {
			return f.cands[resume].off
		}
		return -1
	}
	first := int64(-1)
	if len(passed) > 0 {
		first = f.cands[passed[0].i].off
	} else if resume >= 0 {
		first = f.cands[resume].off
	}
	searched := f.base + int64(len(f.b))
	msg := describe(cl, declaredEnd, why, past, first, f.base, searched, f.open)
	if f.uncounted > 0 && !short {
		msg += fmt.Sprintf("; %d more possible record starts in its block, more than %d bytes before its end, were not examined", f.uncounted, resyncWindow)
	}
	if !w.e.bad(&BadRecord{Source: w.name, Offset: start, Err: fmt.Errorf("%w: %s", ErrBadFraming, msg)}) {
		return false
	}
	for _, i := range lost {
		err := fmt.Errorf("%w: record inside the block of the misframed record at offset %d, more than %d bytes before that block's end: it cannot be read again", ErrBadFraming, start, resyncWindow)
		if !w.e.bad(&BadRecord{Source: w.name, Offset: f.cands[i].off, Err: err}) {
			return false
		}
	}
	for k, v := range passed {
		c := &f.cands[v.i]
		var err error
		if v.damaged {
			why, past := "no CRLF CRLF after the block", false
			if c.blockEnd() > searched && !f.open {
				why, past = "its block runs past the end of the input", true
			}
			err = fmt.Errorf("%w: %s", ErrBadFraming, describe(c.cl, c.blockEnd(), why, past, next(k), c.off, searched, f.open))
		} else {
			err = fmt.Errorf("%w: record inside the block of the misframed record at offset %d: not read again, too much of the input has been read twice already", ErrBadFraming, start)
		}
		if !w.e.bad(&BadRecord{Source: w.name, Offset: c.off, Err: err}) {
			return false
		}
	}

	if resume >= 0 {
		c := &f.cands[resume]
		if c.off < f.end {
			w.p.unread(f.b[c.off-f.base : f.end-f.base])
			w.replayed += f.end - c.off
		} else {
			w.p.discard(c.off - f.end)
		}
		return true
	}
	// Nothing to resume at in the window: go on at the next version line
	// after what was examined.
	if n := len(passed); n > 0 {
		if last := f.cands[passed[n-1].i].off; last >= f.end {
			w.p.discard(last + 1 - f.end)
		}
	}
	return w.resync()
}

// describe words a framing error: the record with Content-Length cl should
// have ended at end; why says what showed it was wrong, and past whether it
// showed the length to be too long. next is where the next record was found
// (-1: none between offsets from and to; open: the input goes on after to).
func describe(cl, end int64, why string, past bool, next, from, to int64, open bool) string {
	if next < 0 {
		verb := "does not match the record end"
		if past {
			verb = "runs past the record end"
		}
		if !open {
			return fmt.Sprintf("Content-Length %d %s: %s; no record start found between offset %d and the end of the input", cl, verb, why, from)
		}
		return fmt.Sprintf("Content-Length %d %s: %s; no record start found between offsets %d and %d, reading resumes at the next WARC/1.x line", cl, verb, why, from, to)
	}
	switch {
	case next < end || past:
		return fmt.Sprintf("Content-Length %d runs past the record end: %s; next record found at offset %d", cl, why, next)
	default:
		return fmt.Sprintf("Content-Length %d stops short of the record end: %s; next record found at offset %d", cl, why, next)
	}
}

// endOfInput handles a block cut short by the end of the input. If what was
// read ends with CRLF CRLF the input ended cleanly after a record: its
// Content-Length is too long (or the input was cut right there), and the
// records it swallowed are read again. Otherwise it is a truncated input.
// It returns false if the source is finished.
func (w *warcParser) endOfInput(start, cl int64, typ string, blk *blockReader) bool {
	if !blk.tail.hasSuffix(crlfcrlf) {
		return w.fatalf(start, "%s record: truncated record: input ends %d bytes before the end of the block", typ, blk.remaining())
	}
	f := w.window(blk)
	why := fmt.Sprintf("the input ends %d bytes into the block, after a CRLF CRLF (a wrong length, or an input cut there)", blk.got)
	return w.misframed(start, cl, blk, f, why, true, 0)
}
