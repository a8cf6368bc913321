// Package published is what a deployment's runners publish in the store
// for every process that writes.
//
// That is the observed columns, with their observers, and the guarded
// families. Processes that write but run no observers (a loader, a second
// runner that has not started its workers yet) read it, so that they
// notify what the runners observe and refuse to write a guarded cell
// whose guard they do not know. Both transaction engines read it the same
// way: it lives in the framework's meta table of the raw store, whichever
// engine runs the transactions.
package published

import (
	"context"
	"fmt"
	"slices"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// The published records: one row of the meta table, a cell per observed
// column (the observer's kind byte, then its name) and one per guarded
// family (empty), all at version 0.
var (
	// Row is the meta table's row that holds the records.
	Row = []byte("observed")
	// ObservedFamily holds a cell per observed column.
	ObservedFamily = "obs"
	// GuardedFamily holds a cell per family the runners declare guarded
	// (see engine.GuardSet), so that a writer that does not know a guard
	// refuses to write its cells rather than write them without it.
	GuardedFamily = "grd"
)

// ObservedCell is the published cell of the observed column c of table.
func ObservedCell(table string, c store.Column) store.Column {
	return store.Column{Family: ObservedFamily, Qualifier: string(protocol.EncodeKey(protocol.Key{Table: table, Row: []byte{}, Column: c}))}
}

// GuardedCell is the published cell of a guarded family of table.
func GuardedCell(table, family string) store.Column {
	return store.Column{Family: GuardedFamily, Qualifier: string(protocol.EncodeKey(protocol.Key{Table: table, Row: []byte{}, Column: store.Column{Family: family}}))}
}

// Guarded names a family of a table whose cells are guarded, as runners
// publish them.
type Guarded struct{ Table, Family string }

// Column is one observed column, as runners publish them.
type Column struct {
	Table    string
	Column   store.Column
	Kind     engine.Kind
	Observer string // the observer's name
}

// Replace records the observed columns cols and the guarded families
// guarded in the store, in one row transaction.
//
// It replaces what was published before, so it is for tests and tools
// that set a store up; runners add to what is published instead (the
// observer runtime's Publish).
func Replace(ctx context.Context, st store.Store, cols []Column, guarded []Guarded) error {
	old, err := Cells(ctx, st)
	if err != nil {
		return fmt.Errorf("framework: publish observed columns: %w", err)
	}
	var muts []store.Mutation
	want := map[store.Column]bool{}
	for _, o := range cols {
		c := ObservedCell(o.Table, o.Column)
		want[c] = true
		muts = append(muts, store.Mutation{Column: c, Value: append([]byte{byte(o.Kind)}, o.Observer...)})
	}
	for _, g := range guarded {
		c := GuardedCell(g.Table, g.Family)
		want[c] = true
		muts = append(muts, store.Mutation{Column: c, Value: []byte{}})
	}
	for _, c := range old {
		if !want[c.Column] {
			muts = append(muts, store.Mutation{Column: c.Column, Ts: c.Ts, Delete: true})
		}
	}
	if len(muts) == 0 {
		return nil
	}
	_, err = st.Apply(ctx, &store.RowTxn{Table: protocol.MetaTable, Row: Row, Mutations: muts})
	return err
}

// Cells returns the published cells as the store holds them.
func Cells(ctx context.Context, st store.Store) ([]store.Cell, error) {
	var cells []store.Cell
	req := store.ScanRequest{
		Table: protocol.MetaTable, Start: Row, End: append(slices.Clone(Row), 0),
		Filter: store.ColumnFilter{Families: []string{ObservedFamily, GuardedFamily}},
	}
	for c, err := range st.Scan(ctx, req) {
		if err != nil {
			return nil, err
		}
		cells = append(cells, c)
	}
	return cells, nil
}

// tableColumn keys maps by observed column.
type tableColumn struct {
	table string
	col   store.Column
}

// Set is the set of observed columns, and of guarded families, read from
// the store.
//
// It is an engine.ObservedSet and an engine.GuardedFamilies.
type Set struct {
	kinds     map[tableColumn]engine.Kind
	observers map[tableColumn]string
	guarded   map[Guarded]bool
}

// Load reads the observed columns and guarded families the runners
// published in st.
func Load(ctx context.Context, st store.Store) (*Set, error) {
	cells, err := Cells(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("framework: load observed columns: %w", err)
	}
	ps := &Set{kinds: map[tableColumn]engine.Kind{}, observers: map[tableColumn]string{}, guarded: map[Guarded]bool{}}
	for _, c := range cells {
		k, err := protocol.DecodeKey([]byte(c.Column.Qualifier))
		if err == nil && c.Column.Family == GuardedFamily {
			ps.guarded[Guarded{k.Table, k.Column.Family}] = true
			continue
		}
		if err != nil || len(c.Value) == 0 {
			return nil, fmt.Errorf("framework: load observed columns: %w: bad entry", protocol.ErrCorrupt)
		}
		tc := tableColumn{k.Table, k.Column}
		ps.kinds[tc] = engine.Kind(c.Value[0])
		ps.observers[tc] = string(c.Value[1:])
	}
	return ps, nil
}

// ObservedKind implements engine.ObservedSet.
func (ps *Set) ObservedKind(table string, col store.Column) (engine.Kind, bool) {
	k, ok := ps.kinds[tableColumn{table, col}]
	return k, ok
}

// Tables returns the tables with observed columns, sorted.
func (ps *Set) Tables() []string {
	var ts []string
	for tc := range ps.kinds {
		if !slices.Contains(ts, tc.table) {
			ts = append(ts, tc.table)
		}
	}
	slices.Sort(ts)
	return ts
}

// Len returns the number of observed columns.
func (ps *Set) Len() int { return len(ps.kinds) }

// Guarded implements engine.GuardedFamilies: whether a runner declared
// the family guarded.
func (ps *Set) Guarded(table, family string) bool {
	return ps.guarded[Guarded{table, family}]
}

// Union is the observed set of every set given: a column's kind is the
// one the first set that observes it gives, so that a process's own
// registry, given first, wins over what is published. Nil sets are
// skipped.
func Union(sets ...engine.ObservedSet) engine.ObservedSet { return union(sets) }

type union []engine.ObservedSet

func (u union) ObservedKind(table string, col store.Column) (engine.Kind, bool) {
	for _, s := range u {
		if s == nil {
			continue
		}
		if k, ok := s.ObservedKind(table, col); ok {
			return k, true
		}
	}
	return 0, false
}
