package published

import (
	"cmp"
	"slices"
)

// Columns returns the published observed columns with their observers'
// names, sorted by observer, table and column.
//
// It is what tools that report per observer (lag, backfill) start from.
func (ps *Set) Columns() []Column {
	out := make([]Column, 0, len(ps.kinds))
	for tc, k := range ps.kinds {
		out = append(out, Column{Table: tc.table, Column: tc.col, Kind: k, Observer: ps.observers[tc]})
	}
	slices.SortFunc(out, func(a, b Column) int {
		return cmp.Or(cmp.Compare(a.Observer, b.Observer), cmp.Compare(a.Table, b.Table),
			cmp.Compare(a.Column.Family, b.Column.Family), cmp.Compare(a.Column.Qualifier, b.Column.Qualifier))
	})
	return out
}
