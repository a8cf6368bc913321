package runner

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/scanner"
)

// rowLocks are a runner's advisory row locks (see package scanner). A row
// is locked in process first, so that two scanning goroutines of this
// runner never hand out one row twice, and then, while another live worker
// scans the deployment's store, in the shared NATS bucket as well.
//
// A runner alone keeps its row locks in process and spends no round trip
// on them (a JetStream write to take one and another to release it, per
// row run: 15 % of a runner's CPU when a few new pages were indexed). The
// locks guard nothing that matters for correctness, only work done twice:
// a notification's ack lets one observer transaction commit. A runner that
// joins is seen within the interval of follow; until then the two may run
// a row at once, work the ack turns into a conflict.
type rowLocks struct {
	local  scanner.RowLocker
	shared *cluster.RowLocks
	// alone is set while the latest listing of live workers showed no
	// other worker that scans; a failed listing clears it.
	alone atomic.Bool
	self  string
	log   *slog.Logger
}

func newRowLocks(shared *cluster.RowLocks, self string, log *slog.Logger) *rowLocks {
	return &rowLocks{local: scanner.NewLocalLocks(), shared: shared, self: self, log: log}
}

// TryLock takes the row's lock in process and, unless this runner is
// alone, in the shared bucket.
func (l *rowLocks) TryLock(ctx context.Context, table string, row []byte) (func(), bool, error) {
	release, ok, err := l.local.TryLock(ctx, table, row)
	if err != nil || !ok {
		return nil, ok, err
	}
	if l.alone.Load() {
		return release, true, nil
	}
	releaseShared, ok, err := l.shared.TryLock(ctx, table, row)
	if err != nil || !ok {
		release()
		return nil, ok, err
	}
	return func() {
		releaseShared()
		release()
	}, true, nil
}

// check lists the live workers and decides whether this runner is alone.
func (l *rowLocks) check(ctx context.Context, live *cluster.Liveness) {
	ws, err := live.Workers(ctx)
	alone := err == nil && !othersScan(ws, l.self)
	if l.alone.Swap(alone) == alone {
		return
	}
	switch {
	case alone:
		l.log.Info("row locks: no other runner is live; taking row locks in process")
	case err != nil:
		l.log.Warn("row locks: listing the live workers failed; taking row locks in the shared bucket", "err", err)
	default:
		l.log.Info("row locks: another runner is live; taking row locks in the shared bucket")
	}
}

// follow checks every interval until ctx ends.
func (l *rowLocks) follow(ctx context.Context, live *cluster.Liveness, interval time.Duration) {
	every(ctx, interval, func() bool {
		l.check(ctx, live)
		return true
	})
}

// lockModeInterval is how often a runner lists the live workers to decide
// whether it is alone: a tenth of the liveness TTL, at least 100ms (a
// second by default), so that a runner that joins is seen about as soon
// as its first refresh.
func lockModeInterval(ttl time.Duration) time.Duration {
	return max(ttl/10, 100*time.Millisecond)
}

// othersScan reports whether a worker other than self runs scanners.
func othersScan(ws []cluster.WorkerInfo, self string) bool {
	for _, w := range ws {
		if w.Scans && w.ID != self {
			return true
		}
	}
	return false
}
