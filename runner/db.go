package runner

import (
	"context"
	"errors"
	"fmt"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/engine"
)

// openEngine returns a DB of the deployment, wired the one way every
// process of it uses: the engine its store's URL names (see
// Deployment.engine), this process's worker id and liveness (so that its
// locks are resolved as soon as it is gone, and its reads stop when it
// lapses), the lock TTL, telemetry, the observed columns and guards of reg
// (nil: the published ones only) beside those the runners published, and
// notified, called after commits that left notifications. The node keeps
// its engine to adopt the deployment's safe point into it.
func (n *Node) openEngine(ctx context.Context, reg *framework.Registry, notified func([]framework.NotifiedRow)) (*framework.DB, error) {
	o := &framework.Options{
		Engine: n.cfg.engine(), Observers: reg, WorkerID: n.cfg.WorkerID, LockTTL: n.cfg.LockTTL, Notified: notified, History: n.cfg.History,
		Logger: n.log, TracerProvider: n.cfg.TracerProvider, MeterProvider: n.cfg.MeterProvider,
	}
	if n.live != nil {
		// Its transactions read only while this process's token holds:
		// past it, a collection may pass them.
		o.Liveness, o.Lease = n.live, n.live
	}
	db, err := framework.Open(ctx, n.st, n.or, o)
	if err != nil {
		return nil, err
	}
	n.engines.add((*engine.DB)(db).Engine())
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
	db, err := n.openEngine(ctx, observers, n.wakeRunners)
	if errors.Is(err, framework.ErrNoObservedColumns) {
		return nil, fmt.Errorf("runner: the store of %s: %w", n.cfg.DataDir, err)
	}
	return db, err
}

// engine is the transaction engine of the deployment, as its store's URL
// names it: TiKV's own transactions on a tikv:// store, the framework's
// protocol on the embedded store (served by its owner or not). It is
// chosen here, by the URL every process of the deployment is given, and
// not from the type of the store the process ends up with.
func (d *Deployment) engine() framework.Engine {
	if d.onTiKV() {
		return framework.EngineTiKV
	}
	return framework.EngineProtocol
}
