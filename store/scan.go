package store

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/trickle-dev/trickle/internal/keys"
)

// ctxCheckEvery is how many iterator steps a scan takes between checks of
// its context.
const ctxCheckEvery = 256

// Scan returns the cells req selects in key order; see ScanRequest. The scan
// reads a consistent snapshot taken when iteration starts. Its iterator is
// bounded to the table's key range within req.Group, so it never reads a key
// of another group or table. Between columns it seeks rather than stepping
// through unwanted versions, and with a Filter it seeks from one wanted
// column to the next. Validation errors are yielded by the sequence. Like
// ReadRow, it first waits for the ApplyAtomic writes of rows in its range,
// and it yields a row's cells only once no synced write of the row is on
// its way to stable storage any more (see ReadRow).
func (db *DB) Scan(ctx context.Context, req ScanRequest) iter.Seq2[Cell, error] {
	p, err := db.planScan(req)
	return func(yield func(Cell, error) bool) {
		if err != nil {
			yield(Cell{}, err)
			return
		}
		if err := ctx.Err(); err != nil {
			yield(Cell{}, err)
			return
		}
		if err := db.acquire(); err != nil {
			yield(Cell{}, err)
			return
		}
		defer db.release()
		if p.empty {
			return
		}
		if err := db.pending.waitRange(ctx, req.Table, req.Start, req.End); err != nil {
			yield(Cell{}, err)
			return
		}
		c, err := db.newIter(ctx, p.lower, p.upper)
		if err != nil {
			yield(Cell{}, err)
			return
		}
		defer c.close()
		if err := p.run(ctx, c, db.latches, yield); err != nil {
			yield(Cell{}, err)
		}
	}
}

// scanPlan is a validated ScanRequest translated into key space.
type scanPlan struct {
	table        string
	lower, upper []byte // iterator bounds: the table (and row range) in the group
	start        []byte // first key to seek to (>= lower)
	spans        []Span
	allVersions  bool
	filter       *colFilter // nil matches every column
	empty        bool       // the row range is empty: yield nothing
}

// planScan validates req and computes its key ranges.
func (db *DB) planScan(req ScanRequest) (*scanPlan, error) {
	const op = "Scan"
	known := func(g string) bool { _, ok := db.layout.GroupID(g); return ok }
	if err := validateScan(req, db.layout.GroupName, known); err != nil {
		return nil, err
	}
	gid, _ := db.layout.GroupID(req.Group)
	f, err := db.newColFilter(op, gid, req.Filter)
	if err != nil {
		return nil, err
	}
	p := &scanPlan{table: req.Table, spans: spansOrAll(slices.Clone(req.Spans)), filter: f}
	if req.Start != nil && req.End != nil && bytes.Compare(req.Start, req.End) >= 0 {
		p.empty = true
		return p, nil
	}
	p.allVersions = len(p.spans) == 1 && p.spans[0] == AllVersions
	tablePrefix := keys.AppendTablePrefix(nil, gid, req.Table)
	p.lower, p.upper = tablePrefix, keys.PrefixSuccessor(tablePrefix)
	if req.Start != nil {
		p.lower = keys.AppendRowPrefix(nil, gid, req.Table, req.Start)
	}
	if req.End != nil {
		p.upper = keys.AppendRowPrefix(nil, gid, req.Table, req.End)
	}
	if f != nil && keys.OneRow(req.Start, req.End) {
		// A scan of one row (a family of a row, the commonest scan
		// there is) iterates only the part of it the filter wants.
		p.lower, p.upper = keys.SuffixBounds(p.lower, f.targets)
	}
	p.start = p.lower
	if a := req.After; a != nil {
		after := keys.PrefixSuccessor(keys.AppendColumnPrefix(nil, gid, req.Table, a.Row, a.Column.Family, a.Column.Qualifier))
		if bytes.Compare(after, p.start) > 0 {
			p.start = after
		}
	}
	return p, nil
}

// validateScan checks req as Scan does, in the same order: groupOf names
// the group of a family and known tells the store's groups apart from
// unknown names. After is only checked if the row range is not empty.
func validateScan(req ScanRequest, groupOf func(family string) string, known func(group string) bool) error {
	const op = "Scan"
	if req.Table == "" {
		return invalid(op, "Table", "empty table name")
	}
	if !known(req.Group) {
		return invalid(op, "Group", "unknown group %q", req.Group)
	}
	if err := validateSpans(op, req.Spans, func() string { return "Spans" }); err != nil {
		return err
	}
	group := req.Group
	if group == "" {
		group = DefaultGroup
	}
	check := func(field func() string, fam string) error {
		if fam == "" {
			return invalid(op, field(), "empty family")
		}
		if g := groupOf(fam); g != group {
			return invalid(op, field(), "family %q is in group %q, not the scanned group", fam, g)
		}
		return nil
	}
	for i, fam := range req.Filter.Families {
		if err := check(func() string { return fmt.Sprintf("Filter.Families[%d]", i) }, fam); err != nil {
			return err
		}
	}
	for i, col := range req.Filter.Columns {
		if err := check(func() string { return fmt.Sprintf("Filter.Columns[%d].Family", i) }, col.Family); err != nil {
			return err
		}
	}
	if req.Start != nil && req.End != nil && bytes.Compare(req.Start, req.End) >= 0 {
		return nil
	}
	if a := req.After; a != nil {
		if len(a.Row) == 0 {
			return invalid(op, "After.Row", "empty row")
		}
		if err := validateColumn(op, "After.Column", a.Column); err != nil {
			return err
		}
	}
	return nil
}

// colFilter matches columns by their escaped suffix within a row
// (esc(family) esc(qualifier)), and knows the next wanted suffix after any
// unwanted one so the scan can seek there.
type colFilter struct {
	families map[string]bool // escaped family -> wanted
	columns  map[string]bool // escaped family+qualifier -> wanted
	targets  [][]byte        // all of the above, sorted
}

// newColFilter validates f against group gid; a zero filter yields nil.
func (db *DB) newColFilter(op string, gid keys.Group, f ColumnFilter) (*colFilter, error) {
	if len(f.Families) == 0 && len(f.Columns) == 0 {
		return nil, nil
	}
	cf := &colFilter{families: map[string]bool{}, columns: map[string]bool{}}
	check := func(field, fam string) error {
		if fam == "" {
			return invalid(op, field, "empty family")
		}
		if g := db.layout.GroupOf(fam); g != gid {
			return invalid(op, field, "family %q is in group %q, not the scanned group", fam, db.layout.GroupName(fam))
		}
		return nil
	}
	for i, fam := range f.Families {
		if err := check(fmt.Sprintf("Filter.Families[%d]", i), fam); err != nil {
			return nil, err
		}
		t := keys.AppendFamilySuffix(nil, fam)
		cf.families[string(t)] = true
		cf.targets = append(cf.targets, t)
	}
	for i, col := range f.Columns {
		if err := check(fmt.Sprintf("Filter.Columns[%d].Family", i), col.Family); err != nil {
			return nil, err
		}
		t := keys.AppendColumnSuffix(nil, col.Family, col.Qualifier)
		cf.columns[string(t)] = true
		cf.targets = append(cf.targets, t)
	}
	slices.SortFunc(cf.targets, bytes.Compare)
	return cf, nil
}

// match reports whether the column with escaped suffix col (family segment
// ending at famEnd) is wanted; if not, next is the smallest wanted suffix
// above it in the row, or nil if the rest of the row is unwanted.
func (f *colFilter) match(col []byte, famEnd int) (ok bool, next []byte) {
	if f.families[string(col[:famEnd])] || f.columns[string(col)] {
		return true, nil
	}
	i, _ := slices.BinarySearchFunc(f.targets, col, bytes.Compare)
	if i < len(f.targets) {
		return false, f.targets[i]
	}
	return false, nil
}
