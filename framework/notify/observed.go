package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/internal/published"
	"github.com/trickle-dev/trickle/store"
)

// The published records are internal/published's: Publish and Unpublish
// write them one cell at a time, with row transactions that check what
// they replace, instead of rewriting the row: a runner never removes what
// another published.

// Errors of publishing. Test for them with errors.Is.
var (
	// ErrPublishConflict means a column this registry observes is
	// published for another observer, or for another kind of observer:
	// two runners of a deployment disagree about who observes it (an
	// observer renamed, or turned from strong to weak, in a new version
	// that runs beside the old one). Nothing was published. Once no
	// runner runs the other observer any more, Unpublish it, and publish
	// again.
	ErrPublishConflict = errors.New("notify: observed column published by another observer")
	// ErrNotPublished means Unpublish was asked to remove an observer or
	// a guarded family that is not published. Nothing was removed.
	ErrNotPublished = errors.New("notify: not published")
)

// Publish adds reg's observed columns and guarded families to those
// published in the store, so that processes that write but run no
// observers (loaders, tools) notify what the runners observe, and refuse
// to write a guarded cell whose guard they do not know.
//
// Publishing is a union: it never removes what another registry
// published, so a runner of an older version that restarts during a
// rolling upgrade does not take back the columns of a newer one's
// observers. Removing an observer that no runner runs any more is an
// operator's explicit act (Unpublish, or runner unpublish). Runners
// publishing at once all end up published: each adds its cells with a
// row transaction that checks they are still absent, and reads again
// when another got there first. A column published for another observer
// or kind fails with ErrPublishConflict.
func Publish(ctx context.Context, st store.Store, reg *framework.Registry) error {
	want := map[store.Column][]byte{}
	names := map[store.Column]string{}
	for _, o := range reg.Observers() {
		for _, c := range o.Columns {
			col := published.ObservedCell(o.Table, c)
			want[col] = append([]byte{byte(engine.Kind(o.Kind))}, o.Name...)
			names[col] = fmt.Sprintf("%s %s", o.Table, c)
		}
	}
	for _, g := range reg.Guards() {
		want[published.GuardedCell(g.Table, g.Family)] = []byte{}
	}
	for {
		cells, err := readPublished(ctx, st)
		if err != nil {
			return fmt.Errorf("notify: publish observed columns: %w", err)
		}
		txn := &store.RowTxn{Table: protocol.MetaTable, Row: published.Row}
		for _, col := range sortedColumns(want) {
			v := want[col]
			if cur, ok := cells[col]; ok {
				if !bytes.Equal(cur, v) {
					return fmt.Errorf("%w: %s is published for %s, and this registry's observer is %s", ErrPublishConflict, names[col], describe(cur), describe(v))
				}
				continue
			}
			txn.Checks = append(txn.Checks, store.Check{Column: col, MaxTs: math.MaxUint64, Expect: store.MustBeAbsent})
			txn.Mutations = append(txn.Mutations, store.Mutation{Column: col, Value: v})
		}
		if len(txn.Mutations) == 0 {
			return nil
		}
		res, err := st.Apply(ctx, txn)
		if err != nil {
			return fmt.Errorf("notify: publish observed columns: %w", err)
		}
		if res.Applied {
			return nil
		}
		// Another publisher added one of these columns meanwhile: read
		// again, to add the rest or find that it disagrees.
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Unpublish removes from the store the published columns of the named
// observers, and nothing else: for an observer no runner of the
// deployment runs any more (writers would otherwise keep notifying its
// columns, for nobody). A runner that still runs one publishes it again
// when it starts. A name with no published column fails with
// ErrNotPublished, and then nothing is removed. It returns how many
// columns it removed.
func Unpublish(ctx context.Context, st store.Store, observers ...string) (int, error) {
	cells, err := readPublished(ctx, st)
	if err != nil {
		return 0, fmt.Errorf("notify: unpublish: %w", err)
	}
	txn := &store.RowTxn{Table: protocol.MetaTable, Row: published.Row}
	found := map[string]bool{}
	var names []string
	for _, col := range sortedColumns(cells) {
		v := cells[col]
		if col.Family != published.ObservedFamily || len(v) == 0 {
			continue
		}
		name := string(v[1:])
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		if slices.Contains(observers, name) {
			found[name] = true
			// Only if it is still this observer's: the column may have
			// been unpublished and published for another meanwhile.
			txn.Mutations = append(txn.Mutations, store.Mutation{Column: col, Delete: true, IfValuePrefix: v})
		}
	}
	for _, name := range observers {
		if !found[name] {
			slices.Sort(names)
			return 0, fmt.Errorf("%w: observer %q has no published column (published: %s)", ErrNotPublished, name, strings.Join(names, ", "))
		}
	}
	if len(txn.Mutations) == 0 {
		return 0, nil
	}
	if _, err := st.Apply(ctx, txn); err != nil {
		return 0, fmt.Errorf("notify: unpublish: %w", err)
	}
	return len(txn.Mutations), nil
}

// UnpublishGuard removes a guarded family from those published: for a
// guard no registry declares any more, since writers refuse to write the
// family's cells without knowing its guard. It fails with
// ErrNotPublished if the family is not published as guarded.
func UnpublishGuard(ctx context.Context, st store.Store, table, family string) error {
	cells, err := readPublished(ctx, st)
	if err != nil {
		return fmt.Errorf("notify: unpublish guard: %w", err)
	}
	col := published.GuardedCell(table, family)
	if _, ok := cells[col]; !ok {
		return fmt.Errorf("%w: family %s of table %s is not published as guarded", ErrNotPublished, family, table)
	}
	_, err = st.Apply(ctx, &store.RowTxn{Table: protocol.MetaTable, Row: published.Row, Mutations: []store.Mutation{{Column: col, Delete: true}}})
	if err != nil {
		return fmt.Errorf("notify: unpublish guard: %w", err)
	}
	return nil
}

// readPublished returns the published cells by column.
func readPublished(ctx context.Context, st store.Store) (map[store.Column][]byte, error) {
	all, err := published.Cells(ctx, st)
	if err != nil {
		return nil, err
	}
	cells := map[store.Column][]byte{}
	for _, c := range all {
		if _, ok := cells[c.Column]; !ok { // the newest version
			cells[c.Column] = c.Value
		}
	}
	return cells, nil
}

// sortedColumns returns the columns of m in order, so that the row
// transactions Publish writes are the same whatever the map's order.
func sortedColumns[V any](m map[store.Column]V) []store.Column {
	cols := make([]store.Column, 0, len(m))
	for c := range m {
		cols = append(cols, c)
	}
	slices.SortFunc(cols, func(a, b store.Column) int {
		if c := strings.Compare(a.Family, b.Family); c != 0 {
			return c
		}
		return strings.Compare(a.Qualifier, b.Qualifier)
	})
	return cols
}

// describe names the observer a published value records.
func describe(v []byte) string {
	if len(v) == 0 {
		return "no observer"
	}
	kind := "weak"
	if engine.Kind(v[0]) == engine.Strong {
		kind = "strong"
	}
	return fmt.Sprintf("%s observer %q", kind, v[1:])
}
