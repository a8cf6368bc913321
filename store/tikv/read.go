package tikv

import (
	"bytes"
	"context"

	"github.com/tikv/client-go/v2/txnkv/txnsnapshot"

	"github.com/trickle-dev/trickle/internal/keys"
	"github.com/trickle-dev/trickle/internal/tikvcall"
	"github.com/trickle-dev/trickle/store"
)

// ReadRow returns, for each column of cols in order, the versions the spans
// select, read from a snapshot at a fresh timestamp.
func (s *Store) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	if err := store.ValidateReadRow(table, row, cols, spans, s.layout.Families); err != nil || len(cols) == 0 {
		return nil, err
	}
	out, err := s.readRows(ctx, []store.RowRead{{Table: table, Row: row, Columns: cols, Spans: spans}})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// ReadRows reads every row from one snapshot at a fresh timestamp. The
// reads of exact versions of all rows are one batched get (which client-go
// splits by region); every other span of a column is one bounded scan.
func (s *Store) ReadRows(ctx context.Context, reads []store.RowRead) ([][]store.Cell, error) {
	if err := store.ValidateReadRows(reads, s.layout.Families); err != nil {
		return nil, err
	}
	if len(reads) == 0 {
		return nil, nil
	}
	return s.readRows(ctx, reads)
}

// readRows serves validated reads.
func (s *Store) readRows(ctx context.Context, reads []store.RowRead) ([][]store.Cell, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	snap, stop, err := s.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	// First every exact version, in one batched get.
	var exact [][]byte
	for _, r := range reads {
		for _, col := range r.Columns {
			for _, sp := range r.Spans {
				if sp.MinTs == sp.MaxTs {
					exact = append(exact, s.codec.cellKey(nil, s.layout.GroupOf(col.Family), r.Table, r.Row, col, sp.MaxTs))
				}
			}
		}
	}
	got := map[string][]byte{}
	if len(exact) > 0 {
		m, err := snap.BatchGet(ctx, exact)
		if err != nil {
			return nil, s.failIn(ctx, "ReadRows", err)
		}
		for k, e := range m {
			v, err := tikvcall.Unframe([]byte(k), e.Value, errCorrupt)
			if err != nil {
				return nil, err
			}
			got[k] = v
		}
	}
	out := make([][]store.Cell, len(reads))
	for i, r := range reads {
		var cells []store.Cell
		for _, col := range r.Columns {
			g := s.layout.GroupOf(col.Family)
			for _, sp := range spansOrAll(r.Spans) {
				if sp.MinTs == sp.MaxTs {
					if v, ok := got[string(s.codec.cellKey(nil, g, r.Table, r.Row, col, sp.MaxTs))]; ok {
						cells = append(cells, cell(r.Row, col, sp.MaxTs, v))
					}
					continue
				}
				if cells, err = s.readSpan(ctx, snap, cells, g, r.Table, r.Row, col, sp); err != nil {
					return nil, err
				}
			}
		}
		out[i] = cells
	}
	return out, nil
}

// readSpan appends the versions of col that sp selects.
func (s *Store) readSpan(ctx context.Context, snap *txnsnapshot.KVSnapshot, cells []store.Cell, g keys.Group, table string, row []byte, col store.Column, sp store.Span) ([]store.Cell, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lo, hi := s.codec.versionRange(g, table, row, col, sp.MinTs, sp.MaxTs)
	batch := s.o.ScanBatchSize
	if sp.Limit > 0 && sp.Limit < batch {
		batch = sp.Limit + 1 // +1: the iterator looks one past the last
	}
	snap.SetScanBatchSize(batch)
	it, err := snap.Iter(lo, hi)
	if err != nil {
		return nil, s.failIn(ctx, "reading", err)
	}
	defer it.Close()
	for n := 0; it.Valid() && (sp.Limit == 0 || n < sp.Limit); n++ {
		v, err := tikvcall.Unframe(it.Key(), it.Value(), errCorrupt)
		if err != nil {
			return nil, err
		}
		cells = append(cells, cell(row, col, keys.DecodeTs(it.Key()), v))
		if err := it.Next(); err != nil {
			return nil, s.failIn(ctx, "reading", err)
		}
	}
	return cells, nil
}

// spansOrAll returns spans, or AllVersions when there are none.
func spansOrAll(spans []store.Span) []store.Span {
	if len(spans) == 0 {
		return []store.Span{store.AllVersions}
	}
	return spans
}

// cell builds a Cell that owns its memory.
func cell(row []byte, col store.Column, ts uint64, value []byte) store.Cell {
	return store.Cell{Row: bytes.Clone(row), Column: col, Ts: ts, Value: append([]byte{}, value...)}
}
