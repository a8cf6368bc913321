// Package admin is what operators and tools use on a deployment, beside
// what observer authors need: counting and listing pending and failing
// notifications, waiting until observers are idle, dumping a table's raw
// cells, and collecting old versions.
package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/published"
	"github.com/trickle-dev/trickle/internal/retry"
	"github.com/trickle-dev/trickle/store"
)

// ObservedTables returns the tables with observed columns that the runners
// published in st, sorted: where notifications may be pending.
func ObservedTables(ctx context.Context, st store.Store) ([]string, error) {
	ps, err := published.Load(ctx, st)
	if err != nil {
		return nil, err
	}
	return ps.Tables(), nil
}

// Pending counts the notifications pending in tables (nil: the observed
// tables), reading the notify locality group only.
func Pending(ctx context.Context, st store.Store, tables []string) (int, error) {
	if tables == nil {
		var err error
		if tables, err = ObservedTables(ctx, st); err != nil {
			return 0, err
		}
	}
	return notify.Pending(ctx, st, tables)
}

// AwaitNoPending waits until tables have no pending notification.
//
// It polls every poll; nil tables are the observed tables. If ctx ends
// first, the error says how many were left. It is for callers that know
// no new writes are coming (tests, batch loads): a runner's wait also
// checks that no transaction ran.
func AwaitNoPending(ctx context.Context, st store.Store, tables []string, poll time.Duration) error {
	for {
		n, err := Pending(ctx, st, tables)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if err := retry.Sleep(ctx, poll); err != nil {
			return fmt.Errorf("admin: %d notifications still pending: %w", n, err)
		}
	}
}

// Failure describes a notification whose observer keeps failing.
type Failure struct {
	Table     string
	Row       []byte
	Column    framework.Column
	Observer  string
	Attempts  int
	LastError string
	FirstAt   time.Time
	LastAt    time.Time
	NextRetry time.Time
	Worker    string // the worker that failed last
}

// String names the failing cell.
func (f Failure) String() string { return fmt.Sprintf("%s/%q/%s", f.Table, f.Row, f.Column) }

// Failures lists the notifications whose observer failed and that are
// still pending.
func Failures(ctx context.Context, st store.Store) ([]Failure, error) {
	fs, err := notify.Failures(ctx, st)
	if err != nil {
		return nil, err
	}
	out := make([]Failure, len(fs))
	for i, f := range fs {
		out[i] = Failure{Table: f.Table, Row: f.Row, Column: f.Column, Observer: f.Observer, Attempts: f.Attempts,
			LastError: f.LastError, FirstAt: f.FirstAt, LastAt: f.LastAt, NextRetry: f.NextRetry, Worker: f.Worker}
	}
	return out, nil
}

// GCStats reports what a garbage collection did.
type GCStats struct {
	SafePoint     uint64
	Columns       int // columns examined
	Deleted       int // versions removed
	LocksResolved int // locks below the safe point rolled forward or back
	// DeletionsKept counts deletions of strongly observed cells whose
	// record stays until their observer has seen them (a pending
	// notification): without it the observer could not tell the cell was
	// deleted.
	DeletionsKept int
	// Compacted lists the tables the collection compacted: those it
	// removed at least an eighth of the versions of, which reads would
	// otherwise step over as tombstones until the store's own
	// compactions reached them. Only a store in this process compacts.
	Compacted []string
}

// GC removes the versions no snapshot at or above the safe point can read;
// see the runner, which runs it periodically with a safe point no running
// transaction of any process is below. upTo 0 means a fresh timestamp.
// Transactions that started below the new safe point fail with
// framework.ErrSnapshotTooOld.
func GC(ctx context.Context, db *framework.DB, upTo uint64) (GCStats, error) {
	s, err := (*engine.DB)(db).Engine().GC(ctx, upTo)
	return GCStats(s), err
}

// OldestActive returns the start timestamp of the oldest transaction
// running in db, 0 if none is: what a collection run by other means than
// a runner (which gathers it from every worker's liveness token) must
// stay at or below, for every process on the store.
func OldestActive(db *framework.DB) uint64 { return (*engine.DB)(db).Engine().OldestActive() }

// SafePoint returns db's garbage collection safe point: snapshots at or
// above it are complete.
func SafePoint(db *framework.DB) uint64 { return (*engine.DB)(db).Engine().SafePoint() }
