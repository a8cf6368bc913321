package loader

import (
	"context"
	"fmt"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/store"
)

// ObservedSet returns the observed columns a loader's transactions must
// notify: those the runners published in st (framework.LoadObserved), and
// the web index's own observers, registered here. The latter matter when no
// runner has ever run on the store (the loader owns a fresh directory):
// the published set is then empty, yet the pages must carry notifications
// so that the page observer indexes them once a runner starts.
func ObservedSet(ctx context.Context, st store.Store) (framework.ObservedSet, error) {
	ps, err := framework.LoadObserved(ctx, st)
	if err != nil {
		return nil, err
	}
	reg := framework.NewRegistry()
	if err := webindex.Register(reg); err != nil {
		return nil, fmt.Errorf("loader: web index observers: %w", err)
	}
	reg.Freeze()
	return union{ps, reg}, nil
}

// union is the published set completed by a registry.
type union struct {
	published *framework.PublishedSet
	reg       *framework.Registry
}

func (u union) ObservedKind(table string, col framework.Column) (framework.ObserverKind, bool) {
	if k, ok := u.published.ObservedKind(table, col); ok {
		return k, true
	}
	return u.reg.ObservedKind(table, col)
}

// NewDB returns a DB for loading pages over st and or: opts (nil: defaults)
// with Observed set to ObservedSet(ctx, st).
func NewDB(ctx context.Context, st store.Store, or framework.Oracle, opts *framework.Options) (*framework.DB, error) {
	var o framework.Options
	if opts != nil {
		o = *opts
	}
	obs, err := ObservedSet(ctx, st)
	if err != nil {
		return nil, err
	}
	o.Observed = obs
	return framework.New(st, or, &o)
}

// checkObserved refuses a DB whose commits would not notify the page
// observer: the pages would be stored but never indexed.
func checkObserved(db *framework.DB) error {
	obs := db.Options().Observed
	if obs != nil {
		if k, ok := obs.ObservedKind(webindex.PagesTable, webindex.Doc); ok && k == framework.Strong {
			return nil
		}
	}
	return fmt.Errorf("%w: the DB does not notify %s/%s, so loaded pages would never be indexed (build it with NewDB or ObservedSet)",
		ErrInvalidOptions, webindex.PagesTable, webindex.Doc)
}
