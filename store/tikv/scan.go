package tikv

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/trickle-dev/trickle/internal/keys"
	"github.com/trickle-dev/trickle/internal/tikvcall"
	"github.com/trickle-dev/trickle/store"
)

// ctxCheckEvery is how many keys a scan reads between checks of its
// context.
const ctxCheckEvery = 256

// Scan returns the cells req selects in key order, read from one snapshot
// at a timestamp taken when iteration starts, in pages of
// Options.ScanBatchSize keys. The scan's key range is the table's range in
// req.Group (narrowed to Start and End), so it never reads a region of
// another group. Versions a span does not select are read and dropped;
// columns a filter does not want are skipped by starting a new scan at the
// next wanted column when the skipped column is long. Validation errors are
// yielded by the sequence.
func (s *Store) Scan(ctx context.Context, req store.ScanRequest) iter.Seq2[store.Cell, error] {
	err := store.ValidateScan(req, s.layout.Families)
	return func(yield func(store.Cell, error) bool) {
		if err != nil {
			yield(store.Cell{}, err)
			return
		}
		if err := ctx.Err(); err != nil {
			yield(store.Cell{}, err)
			return
		}
		if err := s.acquire(); err != nil {
			yield(store.Cell{}, err)
			return
		}
		defer s.release()
		if req.Start != nil && req.End != nil && bytes.Compare(req.Start, req.End) >= 0 {
			return
		}
		if err := s.scan(ctx, req, yield); err != nil {
			yield(store.Cell{}, err)
		}
	}
}

// scanState is one scan's progress through a column: the versions of the
// current column the spans may want, kept until the column ends because
// spans yield in their own order, not in key order.
type scanState struct {
	spans   []store.Span
	all     bool // spans is AllVersions: yield as read
	row     []byte
	col     store.Column
	colRaw  []byte // escaped family and qualifier of the current column
	rowRaw  []byte // encoded prefix of the current row (group, table, row)
	pending []version
}

type version struct {
	ts    uint64
	value []byte
}

// flush yields the buffered versions of the current column span by span.
func (st *scanState) flush(yield func(store.Cell, error) bool) bool {
	for _, sp := range st.spans {
		n := 0
		for _, v := range st.pending {
			if v.ts > sp.MaxTs || v.ts < sp.MinTs {
				continue
			}
			if !yield(store.Cell{Row: bytes.Clone(st.row), Column: st.col, Ts: v.ts, Value: v.value}, nil) {
				return false
			}
			if n++; n == sp.Limit {
				break
			}
		}
	}
	st.pending = st.pending[:0]
	return true
}

// wanted reports whether a span may select ts.
func (st *scanState) wanted(ts uint64) bool {
	for _, sp := range st.spans {
		if ts <= sp.MaxTs && ts >= sp.MinTs {
			return true
		}
	}
	return false
}

// scan runs a validated, non-empty scan. It returns the error to yield.
func (s *Store) scan(ctx context.Context, req store.ScanRequest, yield func(store.Cell, error) bool) error {
	start, upper, filter := s.scanRange(req)
	if bytes.Compare(start, upper) >= 0 {
		return nil
	}
	st := &scanState{spans: spansOrAll(req.Spans)}
	st.all = len(st.spans) == 1 && st.spans[0] == store.AllVersions

	snap, stop, err := s.snapshot(ctx)
	if err != nil {
		return err
	}
	defer stop()
	snap.SetScanBatchSize(s.o.ScanBatchSize)
	it, err := snap.Iter(start, upper)
	if err != nil {
		return s.failIn(ctx, "Scan", err)
	}
	defer func() { it.Close() }()
	skipped := 0 // consecutive keys of unwanted columns read
	for steps := 0; it.Valid(); steps++ {
		if steps%ctxCheckEvery == ctxCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		k, err := s.codec.strip(it.Key())
		if err != nil {
			return err
		}
		l, err := keys.Parse(k)
		if err != nil {
			return s.corrupt(k, err)
		}
		colRaw := k[l.RowEnd:l.QualifierEnd]
		if !st.enter(k, l, yield) {
			return nil
		}
		if filter != nil {
			if want, next := filter.match(colRaw, l.FamilyEnd-l.RowEnd); !want {
				if skipped++; skipped >= s.o.ScanBatchSize {
					// A long unwanted stretch: start over at the next
					// wanted column rather than read through it.
					skipped = 0
					target := skipTarget(s.codec.ns, st.rowRaw, next)
					it.Close()
					if bytes.Compare(target, upper) >= 0 {
						return nil
					}
					if it, err = snap.Iter(target, upper); err != nil {
						return s.failIn(ctx, "Scan", err)
					}
					continue
				}
				if err := it.Next(); err != nil {
					return s.failIn(ctx, "Scan", err)
				}
				continue
			}
		}
		skipped = 0
		if ts := keys.DecodeTs(k); st.all || st.wanted(ts) {
			v, err := tikvcall.Unframe(it.Key(), it.Value(), errCorrupt)
			if err != nil {
				return err
			}
			if !st.add(ts, v, yield) {
				return nil
			}
		}
		if err := it.Next(); err != nil {
			return s.failIn(ctx, "Scan", err)
		}
	}
	if !st.all {
		st.flush(yield)
	}
	return nil
}

// scanRange returns the encoded keys a scan reads from and up to, and its
// column filter (nil for all columns): the table's range in the group,
// narrowed to req's rows, to the filter's part of a single row, and past
// req.After.
func (s *Store) scanRange(req store.ScanRequest) (start, upper []byte, filter *colFilter) {
	gid, _ := s.layout.GroupID(req.Group)
	ns := s.codec.ns
	tablePrefix := keys.AppendTablePrefix(slices.Clone(ns), gid, req.Table)
	lower, upper := tablePrefix, keys.PrefixSuccessor(tablePrefix)
	if req.Start != nil {
		lower = keys.AppendRowPrefix(slices.Clone(ns), gid, req.Table, req.Start)
	}
	if req.End != nil {
		upper = keys.AppendRowPrefix(slices.Clone(ns), gid, req.Table, req.End)
	}
	filter = newColFilter(req.Filter)
	if filter != nil && keys.OneRow(req.Start, req.End) {
		// Read only the part of the row the filter wants: a family of a
		// row after a long one (the queued changes after a popular page's
		// inlinks) would otherwise be reached by reading through it.
		lower, upper = keys.SuffixBounds(lower, filter.targets)
	}
	start = lower
	if a := req.After; a != nil {
		after := keys.PrefixSuccessor(keys.AppendColumnPrefix(slices.Clone(ns), gid, req.Table, a.Row, a.Column.Family, a.Column.Qualifier))
		if bytes.Compare(after, start) > 0 {
			start = after
		}
	}
	return start, upper, filter
}

// enter moves the scan to the column of key k (parsed as l), flushing the
// previous column's versions when it is a new one. It reports false when
// yield asked to stop.
func (st *scanState) enter(k []byte, l keys.Layout, yield func(store.Cell, error) bool) bool {
	colRaw := k[l.RowEnd:l.QualifierEnd]
	newRow := !bytes.Equal(st.rowRaw, k[:l.RowEnd])
	if !newRow && bytes.Equal(st.colRaw, colRaw) {
		return true
	}
	if !st.all && !st.flush(yield) {
		return false
	}
	if newRow {
		st.rowRaw = append(st.rowRaw[:0], k[:l.RowEnd]...)
		st.row = keys.AppendUnescaped(st.row[:0], k[l.TableEnd:l.RowEnd])
	}
	st.colRaw = append(st.colRaw[:0], colRaw...)
	st.col = store.Column{
		Family:    keys.UnescapeString(k[l.RowEnd:l.FamilyEnd]),
		Qualifier: keys.UnescapeString(k[l.FamilyEnd:l.QualifierEnd]),
	}
	return true
}

// add takes a wanted version of the current column: yielded at once when
// the scan wants every version, else kept for the column's flush. It
// reports false when yield asked to stop.
func (st *scanState) add(ts uint64, v []byte, yield func(store.Cell, error) bool) bool {
	if st.all {
		return yield(store.Cell{Row: bytes.Clone(st.row), Column: st.col, Ts: ts, Value: bytes.Clone(v)}, nil)
	}
	st.pending = append(st.pending, version{ts, bytes.Clone(v)})
	return true
}

// skipTarget is the encoded key a scan restarts at to skip the rest of an
// unwanted stretch of the row rowRaw: the filter's next wanted suffix in
// the row, or the next row when the row has none.
func skipTarget(ns, rowRaw, next []byte) []byte {
	target := append(slices.Clone(ns), rowRaw...)
	if next == nil {
		target[len(target)-1]++ // the next row
		return target
	}
	return append(target, next...)
}

// corrupt reports a key of the store's range that does not parse.
func (s *Store) corrupt(k []byte, err error) error {
	return fmt.Errorf("%w: key %x: %v", errCorrupt, k, err)
}

// colFilter matches columns by their escaped suffix within a row, and
// knows the next wanted suffix after an unwanted one.
type colFilter struct {
	families map[string]bool
	columns  map[string]bool
	targets  [][]byte
}

// newColFilter returns nil for a zero (match-all) filter. The filter must
// be validated.
func newColFilter(f store.ColumnFilter) *colFilter {
	if len(f.Families) == 0 && len(f.Columns) == 0 {
		return nil
	}
	cf := &colFilter{families: map[string]bool{}, columns: map[string]bool{}}
	for _, fam := range f.Families {
		t := keys.AppendFamilySuffix(nil, fam)
		cf.families[string(t)] = true
		cf.targets = append(cf.targets, t)
	}
	for _, col := range f.Columns {
		t := keys.AppendColumnSuffix(nil, col.Family, col.Qualifier)
		cf.columns[string(t)] = true
		cf.targets = append(cf.targets, t)
	}
	slices.SortFunc(cf.targets, bytes.Compare)
	return cf
}

// match reports whether the column with escaped suffix col is wanted; if
// not, next is the smallest wanted suffix above it, or nil.
func (f *colFilter) match(col []byte, famEnd int) (bool, []byte) {
	if f.families[string(col[:famEnd])] || f.columns[string(col)] {
		return true, nil
	}
	i, _ := slices.BinarySearchFunc(f.targets, col, bytes.Compare)
	if i < len(f.targets) {
		return false, f.targets[i]
	}
	return false, nil
}
