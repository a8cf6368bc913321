package percolator

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/keys"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// ScanOptions select the cells a scan returns; Entry is one it returns.
type (
	ScanOptions = engine.ScanOptions
	Entry       = engine.Entry
)

// scanBounds returns the rows o selects as [start, end).
func scanBounds(o *ScanOptions) (start, end []byte) {
	if o.Prefix == nil {
		return o.Start, o.End
	}
	return o.Prefix, keys.PrefixSuccessor(o.Prefix)
}

func scanMatches(o *ScanOptions, row []byte, col Column) bool {
	start, end := scanBounds(o)
	if bytes.Compare(row, start) < 0 || (end != nil && bytes.Compare(row, end) >= 0) {
		return false
	}
	if a := o.After; a != nil {
		if c := bytes.Compare(row, a.Row); c < 0 || c == 0 && cmp.Or(cmp.Compare(col.Family, a.Column.Family), cmp.Compare(col.Qualifier, a.Column.Qualifier)) <= 0 {
			return false
		}
	}
	if len(o.Families) == 0 && len(o.Columns) == 0 {
		return true
	}
	return slices.Contains(o.Families, col.Family) || slices.Contains(o.Columns, col)
}

// Scan returns the cells of a table in the transaction's snapshot, in row
// then column order, merged with the transaction's own buffered writes (a
// buffered delete hides the stored value). Locks met on the way are resolved
// as Get resolves them. The sequence stops at the first error.
func (tx *Txn) Scan(ctx context.Context, opts ScanOptions) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		if err := tx.validateScan(&opts); err != nil {
			yield(Entry{}, err)
			return
		}
		if err := tx.pin(ctx); err != nil {
			yield(Entry{}, err)
			return
		}
		buffered := tx.bufferedIn(&opts)
		emitBuffered := func(upTo *protocol.Key) bool {
			for len(buffered) > 0 && (upTo == nil || compareKeys(buffered[0].key, *upTo) < 0) {
				m := buffered[0]
				buffered = buffered[1:]
				if m.op == protocol.OpPut && !yield(Entry{Row: m.key.Row, Column: m.key.Column, Value: bytes.Clone(m.value)}, nil) {
					return false
				}
			}
			return true
		}
		for e, err := range tx.db.scanCommitted(ctx, tx.startTs, &opts) {
			if err != nil {
				yield(Entry{}, err)
				return
			}
			k := protocol.Key{Table: opts.Table, Row: e.Row, Column: e.Column}
			if !emitBuffered(&k) {
				return
			}
			if len(buffered) > 0 && compareKeys(buffered[0].key, k) == 0 {
				continue // our own write replaces the stored value
			}
			if err := tx.verify(); err != nil {
				yield(Entry{}, err)
				return
			}
			if !yield(e, nil) {
				return
			}
		}
		emitBuffered(nil)
	}
}

func (tx *Txn) validateScan(o *ScanOptions) error {
	if err := tx.checkUsable(false); err != nil {
		return err
	}
	if err := engine.ValidateScan(o); err != nil {
		return err
	}
	return tx.checkSnapshot()
}

// bufferedIn returns the buffered writes a scan covers, in key order.
func (tx *Txn) bufferedIn(o *ScanOptions) []*mutation {
	var ms []*mutation
	for _, m := range tx.writes {
		if m.key.Table == o.Table && scanMatches(o, m.key.Row, m.key.Column) {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b *mutation) int { return compareKeys(a.key, b.key) })
	return ms
}

// scanCommitted yields the committed cells visible at startTs, resolving
// locks. Deleted cells are skipped.
func (db *DB) scanCommitted(ctx context.Context, startTs uint64, o *ScanOptions) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		start, end := scanBounds(o)
		req := store.ScanRequest{
			Table:  o.Table,
			Start:  start,
			End:    end,
			Filter: store.ColumnFilter{Families: o.Families, Columns: o.Columns},
			Spans:  protocol.ReadSpans(startTs),
			After:  o.After,
		}
		var group []store.Cell
		// flush interprets the cells of one column and yields its value.
		flush := func() bool {
			if len(group) == 0 {
				return true
			}
			k := protocol.Key{Table: o.Table, Row: group[0].Row, Column: group[0].Column}
			value, err := db.visibleValue(ctx, startTs, k, group)
			group = group[:0]
			if errors.Is(err, ErrNotFound) {
				return true
			}
			if err != nil {
				yield(Entry{}, err)
				return false
			}
			return yield(Entry{Row: k.Row, Column: k.Column, Value: value}, nil)
		}
		for c, err := range db.st.Scan(ctx, req) {
			if err != nil {
				yield(Entry{}, fmt.Errorf("framework: scan %s: %w", o.Table, err))
				return
			}
			if len(group) > 0 && (group[0].Column != c.Column || !bytes.Equal(group[0].Row, c.Row)) {
				if !flush() {
					return
				}
			}
			group = append(group, c)
		}
		flush()
	}
}

// visibleValue turns the ReadSpans cells of one column into its value,
// falling back to a point read (which resolves and waits) if a lock is in
// the way.
func (db *DB) visibleValue(ctx context.Context, startTs uint64, k protocol.Key, cells []store.Cell) ([]byte, error) {
	r, err := protocol.InterpretRead(cells, startTs)
	if err != nil {
		return nil, fmt.Errorf("framework: scan %s: %w", k, err)
	}
	if r.Lock != nil {
		return db.readCell(ctx, startTs, k)
	}
	return db.writeValue(ctx, k, r.Write)
}
