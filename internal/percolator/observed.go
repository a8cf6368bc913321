package percolator

import (
	"context"
	"fmt"
	"slices"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// The observed columns are published in the store so that processes that
// write but run no observers (a loader, a second runner that has not started
// its workers yet) write notifications exactly as the runners expect.
var (
	metaObservedRow = []byte("observed")
	observedFamily  = "obs"
	// guardedFamily holds the families the runners declare guarded (see
	// GuardSet): one cell per table and family, so that a writer that
	// does not know a guard refuses to write its cells (see
	// Options.DeclaredGuards) rather than write them without it.
	guardedFamily = "grd"
)

// GuardedFamily names a family of a table whose cells are guarded (see
// GuardSet), as runners publish them.
type GuardedFamily struct{ Table, Family string }

// ObservedColumn is one observed column, as runners publish them.
type ObservedColumn struct {
	Table    string
	Column   Column
	Kind     ObserverKind
	Observer string // the observer's name
}

// PublishObserved records the observed columns cols and the guarded
// families guarded in the store, replacing what an earlier runner
// published, in one row transaction.
func PublishObserved(ctx context.Context, st store.Store, cols []ObservedColumn, guarded []GuardedFamily) error {
	old, err := readObservedRow(ctx, st)
	if err != nil {
		return fmt.Errorf("framework: publish observed columns: %w", err)
	}
	var muts []store.Mutation
	want := map[Column]bool{}
	for _, o := range cols {
		c := Column{Family: observedFamily, Qualifier: string(protocol.EncodeKey(protocol.Key{Table: o.Table, Row: []byte{}, Column: o.Column}))}
		want[c] = true
		muts = append(muts, store.Mutation{Column: c, Value: append([]byte{byte(o.Kind)}, o.Observer...)})
	}
	for _, g := range guarded {
		c := Column{Family: guardedFamily, Qualifier: string(protocol.EncodeKey(protocol.Key{Table: g.Table, Row: []byte{}, Column: Column{Family: g.Family}}))}
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
	_, err = st.Apply(ctx, &store.RowTxn{Table: protocol.MetaTable, Row: metaObservedRow, Mutations: muts})
	return err
}

func readObservedRow(ctx context.Context, st store.Store) ([]store.Cell, error) {
	var cells []store.Cell
	req := store.ScanRequest{
		Table: protocol.MetaTable, Start: metaObservedRow, End: append(slices.Clone(metaObservedRow), 0),
		Filter: store.ColumnFilter{Families: []string{observedFamily, guardedFamily}},
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
	col   Column
}

// PublishedSet is the set of observed columns, and of guarded families,
// read from the store.
type PublishedSet struct {
	kinds     map[tableColumn]ObserverKind
	observers map[tableColumn]string
	guarded   map[GuardedFamily]bool
}

// LoadObserved reads the observed columns a runner published.
func LoadObserved(ctx context.Context, st store.Store) (*PublishedSet, error) {
	cells, err := readObservedRow(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("framework: load observed columns: %w", err)
	}
	ps := &PublishedSet{kinds: map[tableColumn]ObserverKind{}, observers: map[tableColumn]string{}, guarded: map[GuardedFamily]bool{}}
	for _, c := range cells {
		k, err := protocol.DecodeKey([]byte(c.Column.Qualifier))
		if err == nil && c.Column.Family == guardedFamily {
			ps.guarded[GuardedFamily{k.Table, k.Column.Family}] = true
			continue
		}
		if err != nil || len(c.Value) == 0 {
			return nil, fmt.Errorf("framework: load observed columns: %w: bad entry", protocol.ErrCorrupt)
		}
		tc := tableColumn{k.Table, k.Column}
		ps.kinds[tc] = ObserverKind(c.Value[0])
		ps.observers[tc] = string(c.Value[1:])
	}
	return ps, nil
}

// ObservedKind implements ObservedSet.
func (ps *PublishedSet) ObservedKind(table string, col Column) (ObserverKind, bool) {
	k, ok := ps.kinds[tableColumn{table, col}]
	return k, ok
}

// Tables returns the tables with observed columns, sorted.
func (ps *PublishedSet) Tables() []string {
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
func (ps *PublishedSet) Len() int { return len(ps.kinds) }

// Guarded implements GuardedFamilies: whether a runner declared the
// family guarded.
func (ps *PublishedSet) Guarded(table, family string) bool {
	return ps.guarded[GuardedFamily{table, family}]
}
