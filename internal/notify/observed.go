package notify

import (
	"context"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/percolator"
)

// Observed is reg as the transaction engine's observed set: what a
// runner's DB notifies.
func Observed(reg *framework.Registry) percolator.ObservedSet { return registrySet{reg} }

type registrySet struct{ reg *framework.Registry }

func (s registrySet) ObservedKind(table string, col Column) (percolator.ObserverKind, bool) {
	o, ok := s.reg.Lookup(table, col)
	if !ok {
		return 0, false
	}
	return percolator.ObserverKind(o.Kind), true
}

// Publish records reg's observed columns and guarded families in the
// store, replacing what was published before, so that processes that
// write but run no observers (loaders, tools) notify exactly what the
// runners observe, and refuse to write a guarded cell whose guard they do
// not know.
func Publish(ctx context.Context, db *percolator.DB, reg *framework.Registry) error {
	var cols []percolator.ObservedColumn
	for _, o := range reg.Observers() {
		for _, c := range o.Columns {
			cols = append(cols, percolator.ObservedColumn{Table: o.Table, Column: c, Kind: percolator.ObserverKind(o.Kind), Observer: o.Name})
		}
	}
	var guarded []percolator.GuardedFamily
	for _, g := range reg.Guards() {
		guarded = append(guarded, percolator.GuardedFamily{Table: g.Table, Family: g.Family})
	}
	return percolator.PublishObserved(ctx, db.Store(), cols, guarded)
}
