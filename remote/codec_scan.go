package remote

import (
	"github.com/trickle-dev/trickle/store"
)

// midColumn is where a page stopped inside a column: the page's last cell
// was version lastTs of req.After's column, the taken'th cell of the
// column that spans[span] selected. ScanRequest.After can only resume
// after a whole column, so the server finishes such a column first by
// reading it with the remaining spans (see resumeSpans).
type midColumn struct {
	span   int
	taken  int
	lastTs uint64
}

// scanReq is one page request: the caller's ScanRequest (After moved along
// as pages go by), where a previous page stopped inside a column, and how
// many cells the caller wants at most.
type scanReq struct {
	req      store.ScanRequest
	mid      *midColumn // requires req.After
	maxCells int
}

func (e *encoder) scanReq(r *scanReq) {
	q := &r.req
	e.str(q.Table)
	e.str(q.Group)
	e.optBytes(q.Start)
	e.optBytes(q.End)
	e.uvarint(uint64(len(q.Filter.Families)))
	for _, f := range q.Filter.Families {
		e.str(f)
	}
	e.uvarint(uint64(len(q.Filter.Columns)))
	for _, c := range q.Filter.Columns {
		e.column(c)
	}
	e.spans(q.Spans)
	e.bool(q.After != nil)
	if a := q.After; a != nil {
		e.bytes(a.Row)
		e.column(a.Column)
	}
	e.bool(r.mid != nil)
	if m := r.mid; m != nil {
		e.uvarint(uint64(m.span))
		e.uvarint(uint64(m.taken))
		e.u64(m.lastTs)
	}
	e.uvarint(uint64(r.maxCells))
}

func (d *decoder) scanReq() *scanReq {
	r := &scanReq{}
	q := &r.req
	q.Table, q.Group, q.Start, q.End = d.str(), d.str(), d.optBytes(), d.optBytes()
	if n := d.count(1); n > 0 {
		q.Filter.Families = make([]string, n)
		for i := range q.Filter.Families {
			q.Filter.Families[i] = d.str()
		}
	}
	if n := d.count(2); n > 0 {
		q.Filter.Columns = make([]store.Column, n)
		for i := range q.Filter.Columns {
			q.Filter.Columns[i] = d.column()
		}
	}
	q.Spans = d.spans()
	if d.bool() {
		q.After = &store.Position{Row: d.bytes(), Column: d.column()}
	}
	if d.bool() {
		r.mid = &midColumn{span: d.smallUint(), taken: d.smallUint(), lastTs: d.u64()}
		if q.After == nil && d.Err() == nil {
			d.fail("mid-column resume without After")
		}
	}
	r.maxCells = d.smallUint()
	return r
}

// smallUint reads an unsigned count that must fit in an int32.
func (d *decoder) smallUint() int {
	v := d.uvarint()
	if v > 1<<31-1 {
		d.fail("count %d out of range", v)
		return 0
	}
	return int(v)
}

// Flags of a scan page and of its cells.
const (
	pageMore = 1 << 0 // more cells follow: ask again, resuming after the last cell
	pageMid  = 1 << 1 // the last cell is not its column's last: midColumn follows

	cellNewRow = 1 << 0 // the cell's row follows (else: the previous cell's)
	cellNewCol = 1 << 1 // the cell's column follows (else: the previous cell's)
)

// scanPage is a decoded page: cells plus what the next request needs.
type scanPage struct {
	cells []store.Cell
	more  bool
	mid   *midColumn
}

// pageEncoder writes a page response incrementally, leaving out rows and
// columns that repeat the previous cell's (scans return runs of both).
type pageEncoder struct {
	cells   encoder // the cells' encoding
	n       int
	lastRow []byte
	lastCol store.Column
}

// add appends c and returns the encoded size of the page so far.
func (p *pageEncoder) add(c *store.Cell) int {
	var flags byte
	newRow := p.n == 0 || string(c.Row) != string(p.lastRow)
	newCol := newRow || c.Column != p.lastCol
	if newRow {
		flags |= cellNewRow
	}
	if newCol {
		flags |= cellNewCol
	}
	p.cells.u8(flags)
	if newRow {
		p.cells.bytes(c.Row)
		p.lastRow = append(p.lastRow[:0], c.Row...)
	}
	if newCol {
		p.cells.column(c.Column)
		p.lastCol = c.Column
	}
	p.cells.u64(c.Ts)
	p.cells.bytes(c.Value)
	p.n++
	return len(p.cells.b)
}

// finish writes the whole response into e.
func (p *pageEncoder) finish(e *encoder, more bool, mid *midColumn) {
	e.u8(wireVersion)
	var flags byte
	if more {
		flags |= pageMore
	}
	if mid != nil {
		flags |= pageMid
	}
	e.u8(flags)
	if mid != nil {
		e.uvarint(uint64(mid.span))
		e.uvarint(uint64(mid.taken))
		e.u64(mid.lastTs)
	}
	e.uvarint(uint64(p.n))
	e.b = append(e.b, p.cells.b...)
}

// scanPage decodes a page. Rows and values alias the message,
// capacity-limited so that appending to one never overwrites another;
// consecutive cells of one row share their Row bytes (copying them per
// cell would let a forged page make the decoder allocate far more than the
// message size).
func (d *decoder) scanPage() *scanPage {
	d.version()
	p := &scanPage{}
	flags := d.u8()
	if flags&^(pageMore|pageMid) != 0 {
		d.fail("bad page flags %#x", flags)
	}
	p.more = flags&pageMore != 0
	if flags&pageMid != 0 {
		p.mid = &midColumn{span: d.smallUint(), taken: d.smallUint(), lastTs: d.u64()}
		if !p.more {
			d.fail("mid-column page without more")
		}
	}
	n := d.count(10)
	if d.Err() != nil {
		return nil
	}
	if p.more && n == 0 {
		d.fail("empty page with more")
		return nil
	}
	p.cells = make([]store.Cell, n)
	var row []byte
	var col store.Column
	for i := range p.cells {
		flags := d.u8()
		if flags&^(cellNewRow|cellNewCol) != 0 || (i == 0 && flags != cellNewRow|cellNewCol) ||
			(flags&cellNewRow != 0 && flags&cellNewCol == 0) {
			d.fail("bad cell flags %#x", flags)
		}
		if flags&cellNewRow != 0 {
			row = d.bytes()
		}
		if flags&cellNewCol != 0 {
			col = d.column()
		}
		p.cells[i] = store.Cell{Row: row, Column: col, Ts: d.u64(), Value: d.bytes()}
		if d.Err() != nil {
			return nil
		}
	}
	return p
}
