package runner

import (
	"context"
	"fmt"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/notify"
	"github.com/trickle-dev/trickle/internal/percolator"
)

// openEngine returns the transaction engine of the deployment, wired the
// one way every process of it uses: this process's worker id and liveness
// (so that its locks are resolved as soon as it is gone, and its reads
// stop when it lapses), the lock TTL, telemetry, the observed columns,
// the guards of reg (if not nil) and the guarded families the runners
// published (read from the store if published is nil: a cell of one
// whose guard reg does not give is refused, not written without it), and
// notified, called after commits that left notifications.
func (n *Node) openEngine(ctx context.Context, observed percolator.ObservedSet, published *percolator.PublishedSet, reg *framework.Registry, notified func([]percolator.NotifiedRow)) (*percolator.DB, error) {
	if published == nil {
		var err error
		if published, err = percolator.LoadObserved(ctx, n.st); err != nil {
			return nil, err
		}
	}
	opts := &percolator.Options{
		WorkerID: n.cfg.WorkerID, LockTTL: n.cfg.LockTTL, Observed: observed, Notified: notified,
		Logger: n.log, TracerProvider: n.cfg.TracerProvider, MeterProvider: n.cfg.MeterProvider,
	}
	opts.DeclaredGuards = published
	if reg != nil {
		opts.Guards = reg
	}
	if n.live != nil {
		// Its transactions read only while this process's token holds:
		// past it, a collection may pass them.
		opts.Liveness, opts.Lease = n.live, n.live
	}
	db, err := percolator.New(n.st, n.or, opts)
	if err != nil {
		return nil, err
	}
	n.engines.add(db)
	return db, nil
}

// OpenDB returns a DB of the deployment for a process that writes but runs
// no observers (a loader, a tool). Its commits notify the columns the
// runners published, and those of observers if not nil (the pipeline the
// process feeds, so that its writes are notified even into a store no
// runner has served yet); with neither it fails with
// framework.ErrNoObservedColumns. Its commits enforce the guards of
// observers. Committed notifications wake the runners at once.
//
// A node that shares its deployment registers as a live worker first if
// it has not (see StartLiveness): its locks are then resolved as soon as
// it is gone, and collections keep what its transactions read.
func (n *Node) OpenDB(ctx context.Context, observers *framework.Registry) (*framework.DB, error) {
	if err := n.StartLiveness(ctx, "db "+hostInfo()); err != nil {
		return nil, err
	}
	published, err := percolator.LoadObserved(ctx, n.st)
	if err != nil {
		return nil, err
	}
	var observed percolator.ObservedSet = published
	switch {
	case observers != nil:
		observed = percolator.Union(notify.Observed(observers), published)
	case published.Len() == 0:
		return nil, fmt.Errorf("%w: no runner has published observed columns in the store of %s, and this process names none", framework.ErrNoObservedColumns, n.cfg.DataDir)
	}
	db, err := n.openEngine(ctx, observed, published, observers, n.wakeRunners)
	if err != nil {
		return nil, err
	}
	return (*framework.DB)(db), nil
}
