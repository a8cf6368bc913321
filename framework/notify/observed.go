package notify

import (
	"context"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/percolator"
	"github.com/trickle-dev/trickle/store"
)

// Publish records reg's observed columns and guarded families in the
// store, replacing what was published before, so that processes that
// write but run no observers (loaders, tools) notify exactly what the
// runners observe, and refuse to write a guarded cell whose guard they do
// not know.
func Publish(ctx context.Context, st store.Store, reg *framework.Registry) error {
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
	return percolator.PublishObserved(ctx, st, cols, guarded)
}
