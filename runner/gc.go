package runner

import (
	"context"
	"time"

	"github.com/trickle-dev/trickle/framework/oracle"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/internal/retry"
)

// every calls fn every interval until ctx ends or fn returns false.
func every(ctx context.Context, interval time.Duration, fn func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !fn() {
			return
		}
	}
}

// publishOldest keeps this worker's oldest running transaction in its
// liveness token, so that collection anywhere does not pass it.
func (r *Runner) publishOldest(ctx context.Context) {
	r.live.SetOldestActive(r.engine.OldestActive())
	every(ctx, r.node.cfg.LivenessTTL/3, func() bool {
		r.live.SetOldestActive(r.engine.OldestActive())
		return true
	})
}

// collect runs garbage collection periodically (owner only). The safe
// point is the smaller of a fresh timestamp less GCLag — room for
// transactions of processes that run no worker, such as a loader — and the
// oldest transaction any live worker reports. Worker reports are up to a
// refresh interval old, so the fresh timestamp is drawn first and the
// reports read after more than that interval: a transaction that began
// before the timestamp was running at a later refresh.
func (r *Runner) collect(ctx context.Context) {
	every(ctx, r.cfg.GCInterval, func() bool {
		r.collectOnce(ctx)
		return true
	})
}

// collectOnce is one round of collect.
func (r *Runner) collectOnce(ctx context.Context) {
	cfg := r.cfg
	now, err := r.node.or.Timestamp(ctx)
	if err != nil {
		return
	}
	sp := oracle.Compose(oracle.PhysicalMillis(now)-cfg.GCLag.Milliseconds(), 0)
	if retry.Sleep(ctx, cfg.LivenessTTL/3+time.Second) != nil {
		return
	}
	if oldest, ok, err := r.live.ClusterOldestActive(ctx); err != nil {
		r.node.log.Warn("gc: reading the cluster's oldest transaction; skipping this round", "err", err)
		return
	} else if ok && oldest < sp {
		sp = oldest
	}
	if sp <= r.engine.SafePoint() {
		return
	}
	st, err := r.engine.GC(ctx, sp)
	if err != nil {
		r.node.log.Warn("gc", "err", err)
		return
	}
	r.node.log.Info("gc", "safe_point", st.SafePoint, "columns", st.Columns, "deleted", st.Deleted, "locks_resolved", st.LocksResolved)
}

// compactNotifications compacts the notify locality group periodically
// (owner only): every processed notification is a deletion, and until
// compaction drops them, scanners step over the tombstones.
func (r *Runner) compactNotifications(ctx context.Context) {
	every(ctx, r.cfg.CompactInterval, func() bool {
		began := time.Now()
		if err := r.node.localStore().CompactGroup(ctx, protocol.NotifyGroup); err != nil {
			if ctx.Err() == nil {
				r.node.log.Warn("compacting notifications", "err", err)
			}
			return true
		}
		r.node.log.Debug("compacted notifications", "took", time.Since(began))
		return true
	})
}
