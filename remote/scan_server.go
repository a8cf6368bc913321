package remote

import (
	"context"
	"iter"

	"github.com/trickle-dev/trickle/store"
)

// maxPageBytes caps the encoded cells of one scan page, below the NATS max
// payload, so a page is bounded work and memory on both sides.
const maxPageBytes = 1 << 20

// pageSlack is room left in the payload for the page header.
const pageSlack = 64

// scan serves one page: up to maxCells cells (and about maxPageBytes)
// starting after req.After. A page stops before the first cell that does
// not fit, but always holds one: a cell larger than the budget is a page
// of its own, which goes in parts; if that cell continues the page's last column, the page says
// where inside the column it stopped (midColumn), because After can only
// resume after a whole column.
func (s *StoreService) scan(ctx context.Context, d *decoder, e *encoder) error {
	r := d.scanReq()
	if err := d.finish(); err != nil {
		return err
	}
	spans := r.req.Spans
	if len(spans) == 0 {
		spans = []store.Span{store.AllVersions}
	}
	p := &pager{
		spans:    spans,
		maxCells: min(max(r.maxCells, 1), MaxScanPageCells),
		budget:   min(s.srv.payloadLimit()-pageSlack, maxPageBytes),
		span:     -1,
	}
	if m := r.mid; m != nil {
		sub, err := resumeColumn(&r.req, spans, m)
		if err != nil {
			return err
		}
		// The page continues the column: count taken cells as if the
		// previous page's cells were part of it.
		p.row = append(p.row, r.req.After.Row...)
		p.col, p.span, p.taken = r.req.After.Column, m.span, m.taken
		if sub != nil {
			if stop, err := p.consume(s.st.Scan(ctx, *sub)); err != nil || stop {
				p.finish(e)
				return err
			}
		}
	}
	if _, err := p.consume(s.st.Scan(ctx, r.req)); err != nil {
		return err
	}
	p.finish(e)
	return nil
}

// resumeColumn returns the scan that reads the rest of the column a page
// stopped in (req.After's): one row, one column, the spans that remain. It
// returns nil if nothing of the column remains.
func resumeColumn(req *store.ScanRequest, spans []store.Span, m *midColumn) (*store.ScanRequest, error) {
	const op = "Scan"
	a := req.After
	if len(a.Row) == 0 {
		return nil, &store.InvalidError{Op: op, Field: "After.Row", Reason: "empty row"}
	}
	if a.Column.Family == "" {
		return nil, &store.InvalidError{Op: op, Field: "After.Column", Reason: "empty family"}
	}
	if m.span >= len(spans) {
		return nil, &store.InvalidError{Op: op, Field: "resume.span", Reason: "span index out of range"}
	}
	rest := make([]store.Span, 0, len(spans)-m.span)
	if sp := spans[m.span]; m.lastTs > 0 && m.lastTs-1 >= sp.MinTs && (sp.Limit == 0 || m.taken < sp.Limit) {
		sp.MaxTs = min(sp.MaxTs, m.lastTs-1)
		if sp.Limit > 0 {
			sp.Limit -= m.taken
		}
		if sp.MinTs <= sp.MaxTs {
			rest = append(rest, sp)
		}
	}
	rest = append(rest, spans[m.span+1:]...)
	if len(rest) == 0 { // nil spans would mean all versions
		return nil, nil
	}
	end := append(append(make([]byte, 0, len(a.Row)+1), a.Row...), 0) // the row's immediate successor
	return &store.ScanRequest{
		Table:  req.Table,
		Group:  req.Group,
		Start:  a.Row,
		End:    end,
		Filter: store.ColumnFilter{Columns: []store.Column{a.Column}},
		Spans:  rest,
	}, nil
}

// pager fills one page and tracks, for the last cell, which span selected
// it and how many cells of its column that span has selected so far.
type pager struct {
	spans    []store.Span
	maxCells int
	budget   int
	enc      pageEncoder
	size     int
	more     bool
	mid      *midColumn

	row    []byte       // the last cell's row
	col    store.Column // and column
	span   int          // the span that selected it (-1: none yet)
	taken  int          // cells of (row, col) that span selected
	lastTs uint64
}

// consume adds cells from seq until it ends or the page is full; stop
// reports the latter.
func (p *pager) consume(seq iter.Seq2[store.Cell, error]) (stop bool, err error) {
	for c, err := range seq {
		if err != nil {
			return true, err
		}
		sameCol := string(c.Row) == string(p.row) && c.Column == p.col
		// A page can only stop inside a column if it knows the span of its
		// last cell (always, unless the store returned a version no span
		// selects: then the column is finished on this page).
		if p.enc.n > 0 && (p.enc.n >= p.maxCells || p.size+cellSize(&c) > p.budget) && (!sameCol || p.span >= 0) {
			p.more = true
			if sameCol {
				p.mid = &midColumn{span: p.span, taken: p.taken, lastTs: p.lastTs}
			}
			return true, nil
		}
		p.size = p.enc.add(&c)
		sp := spanOf(p.spans, c.Ts)
		if sameCol && sp == p.span {
			p.taken++
		} else {
			p.taken = 1
		}
		if !sameCol {
			p.row = append(p.row[:0], c.Row...)
			p.col = c.Column
		}
		p.span, p.lastTs = sp, c.Ts
	}
	return false, nil
}

// finish writes the page into e.
func (p *pager) finish(e *encoder) { p.enc.finish(e, p.more, p.mid) }

// cellSize bounds the encoded size of c in a page.
func cellSize(c *store.Cell) int {
	return 1 + 10 + len(c.Row) + 20 + len(c.Column.Family) + len(c.Column.Qualifier) + 8 + 10 + len(c.Value)
}

// spanOf returns the index of the span that selects ts (spans do not
// overlap), or -1.
func spanOf(spans []store.Span, ts uint64) int {
	for i, s := range spans {
		if s.MinTs <= ts && ts <= s.MaxTs {
			return i
		}
	}
	return -1
}
