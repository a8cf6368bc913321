package runner

import (
	"context"
	"time"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/internal/retry"
	"github.com/trickle-dev/trickle/oracle"
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

// collect runs garbage collection periodically (owner only): every
// GCInterval, and sooner once the store settles after much work (see
// settle), so that a load is followed by a collection about GCLag after
// it ends rather than up to GCInterval later.
func (r *Runner) collect(ctx context.Context) {
	cfg := r.cfg
	s := settle{after: uint64(max(cfg.GCSettledAfter, 0)), window: cfg.GCLag}
	last := time.Now()
	every(ctx, settleTick(cfg.GCLag, cfg.GCInterval), func() bool {
		due := time.Since(last) >= cfg.GCInterval
		issued, _, err := r.node.OracleStats(ctx)
		if err == nil && s.observe(time.Now(), issued) {
			due = true
		}
		if due && r.collectOnce(ctx) {
			last = time.Now()
			s.collected(issued)
		}
		return true
	})
}

// collectOnce is one round of collection. The safe point is the smaller
// of a fresh timestamp less GCLag — room for transactions of processes
// that report none, such as programs opening a DB on the store by other
// means than a Node — and the oldest transaction any live worker reports.
// Reports are as of their token's last write, so the timestamp is drawn
// first and the workers listed, and the reports are read after more than
// two refresh intervals, from tokens all computed since (see
// cluster.Liveness.ClusterOldestActive). It reports whether the round was
// decided: collected, or found that the safe point could not move.
func (r *Runner) collectOnce(ctx context.Context) bool {
	cfg := r.cfg
	now, err := r.node.or.Timestamp(ctx)
	if err != nil {
		return false
	}
	sp := oracle.Compose(oracle.PhysicalMillis(now)-cfg.GCLag.Milliseconds(), 0)
	since, err := r.live.Workers(ctx)
	if err != nil {
		r.node.log.Warn("gc: listing the workers; skipping this round", "err", err)
		return false
	}
	if retry.Sleep(ctx, r.live.ReportsWait()) != nil {
		return false
	}
	if oldest, ok, err := r.live.ClusterOldestActive(ctx, since); err != nil {
		r.node.log.Warn("gc: reading the cluster's oldest transaction; skipping this round", "err", err)
		return false
	} else if ok && oldest < sp {
		sp = oldest
	}
	if sp <= r.engine.SafePoint() {
		r.gcRounds.Add(1)
		return true
	}
	began := time.Now()
	st, err := r.engine.GC(ctx, sp)
	if err != nil {
		if ctx.Err() == nil { // not a shutdown cutting a collection or its compactions short
			r.node.log.Warn("gc", "err", err)
		}
		return false
	}
	r.gcRounds.Add(1)
	r.node.log.Info("gc", "safe_point", st.SafePoint, "columns", st.Columns, "deleted", st.Deleted, "locks_resolved", st.LocksResolved, "deletions_kept", st.DeletionsKept, "compacted", st.Compacted, "took", time.Since(began))
	return true
}

// gcLeaseTTL is how long the GC lease of a TiKV deployment lasts for a
// collection interval: a little less than the interval, so that it has
// expired when the runners' next rounds come, in whole seconds (the NATS
// server counts TTLs in seconds).
func gcLeaseTTL(interval time.Duration) time.Duration {
	return max(time.Second, (interval - interval/10).Truncate(time.Second))
}

// collectLeased runs garbage collection periodically on a TiKV store, where
// no process owns the store: at each round, the runner that takes the
// deployment's GC lease collects, and the others skip. The lease is a key
// with a TTL in a NATS key-value bucket (the advisory locks scanners use),
// left to expire rather than released, so that one collection runs per
// interval however many runners there are, and a runner that dies holding
// it holds up one round at most. Correctness does not rest on the lease:
// two collections at once would both respect every running transaction.
func (r *Runner) collectLeased(ctx context.Context) {
	lease, err := cluster.NewRowLocks(ctx, r.node.js, r.node.cfg.WorkerID, cluster.RowLockOptions{
		Bucket: r.node.cfg.Namespace + "_gc", TTL: gcLeaseTTL(r.cfg.GCInterval), Logger: r.node.log,
	})
	if err != nil {
		r.node.log.Error("gc: the GC lease bucket is unavailable; this runner will not collect", "err", err)
		return
	}
	every(ctx, r.cfg.GCInterval, func() bool {
		r.collectIfLeader(ctx, lease)
		return true
	})
}

// collectIfLeader is one round of collectLeased; it reports whether this
// runner held the lease and collected.
func (r *Runner) collectIfLeader(ctx context.Context, lease *cluster.RowLocks) bool {
	_, ok, err := lease.TryLock(ctx, "gc", []byte("lease"))
	if err != nil {
		r.node.log.Warn("gc: taking the GC lease; skipping this round", "err", err)
		return false
	}
	if !ok {
		r.node.log.Debug("gc: another runner holds the GC lease")
		return false
	}
	r.collectOnce(ctx)
	return true
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
