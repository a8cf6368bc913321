package tikvengine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trickle-dev/trickle/internal/engine"
)

// active keeps the start timestamps of the transactions running in a DB,
// so that the process can report its oldest (see OldestActive) and a
// collection keeps what they read.
type active struct {
	mu   sync.Mutex
	runs map[uint64]int // start timestamp -> transactions running at it
}

func (a *active) add(ts uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs == nil {
		a.runs = map[uint64]int{}
	}
	a.runs[ts]++
}

func (a *active) remove(ts uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.runs[ts]--; a.runs[ts] <= 0 {
		delete(a.runs, ts)
	}
}

func (a *active) oldest() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var o uint64
	for ts := range a.runs {
		if o == 0 || ts < o {
			o = ts
		}
	}
	return o
}

// start draws a start timestamp (at, if not 0, is one already chosen)
// and registers a transaction at it, returning the function that ends
// the registration. Until the timestamp is drawn the transaction is
// registered at the highest timestamp this DB has drawn, which is below
// it: a collection that reads OldestActive while the timestamp is being
// drawn cannot pass it.
func (db *DB) start(ctx context.Context, at uint64) (uint64, func(), error) {
	floor := max(db.lastTs.Load(), 1)
	db.active.add(floor)
	ts := at
	var err error
	if ts == 0 {
		ts, err = db.timestamp(ctx)
	}
	if err != nil {
		db.active.remove(floor)
		return 0, nil, err
	}
	db.active.add(ts)
	db.active.remove(floor)
	return ts, func() { db.active.remove(ts) }, nil
}

// counts are the DB's running totals (see Counts).
type counts struct {
	committed, conflicts atomic.Uint64
	// importBatches counts the batches imports committed, which are not
	// transactions of Transact's and not in Counts.
	importBatches atomic.Uint64
}

// OldestActive is the start timestamp of the oldest transaction running
// in this DB (in every DB sharing its Barrier, if it has one), 0 if none
// is. The runners' collections stay below it while
// the process reports it.
func (db *DB) OldestActive() uint64 { return db.active.oldest() }

// Counts returns the transactions this DB committed and the commits that
// conflicted.
func (db *DB) Counts() engine.Counts {
	return engine.Counts{Committed: db.counts.committed.Load(), Conflicts: db.counts.conflicts.Load()}
}

// GC is a collection by TiKV's own: client-go resolves every lock below
// upTo (rolling each transaction forward or back as its primary says),
// then asks PD to move the transaction safe point to upTo, below which
// TiKV drops the versions no snapshot at or above it reads, and refuses
// reads. Settled notifications and overwritten acks are such versions.
// The safe point never moves back: a smaller upTo leaves it where it is.
// Nor does it pass a GC barrier on PD, this process's (raised first) or
// another's (see Barrier): the safe point returned may be below upTo.
// upTo 0 means a fresh timestamp.
func (db *DB) GC(ctx context.Context, upTo uint64) (engine.GCStats, error) {
	if err := ctx.Err(); err != nil {
		return engine.GCStats{}, fmt.Errorf("tikvengine: collecting: %w", err)
	}
	ctx, cancel := db.deadline(ctx)
	defer cancel()
	if upTo == 0 {
		var err error
		if upTo, err = db.timestamp(ctx); err != nil {
			return engine.GCStats{}, err
		}
	}
	if b := db.opts.Barrier; b != nil {
		// This process's own barrier is up to a refresh old: raise it
		// first, so that it holds the collection back only as far as
		// the process's transactions and history need.
		if err := b.Refresh(ctx); err != nil {
			return engine.GCStats{}, err
		}
	}
	sp, err := db.kv.GC(ctx, upTo)
	if err != nil {
		return engine.GCStats{}, failIn(ctx, fmt.Sprintf("collecting up to %d", upTo), err)
	}
	db.setSafePoint(sp)
	return engine.GCStats{SafePoint: sp}, nil
}

// AdoptSafePoint reads TiKV's safe point from PD now (not from the cache
// SafePoint answers from) and returns it. Past it, client-go refuses this
// DB's reads below it with an error Transact reports as
// engine.ErrSnapshotTooOld.
func (db *DB) AdoptSafePoint(ctx context.Context) (uint64, error) {
	ctx, cancel := db.deadline(ctx)
	defer cancel()
	sp, err := db.readSafePoint(ctx)
	if err != nil {
		return db.safePoint.Load(), failIn(ctx, "reading the GC safe point", err)
	}
	db.setSafePoint(sp)
	return db.safePoint.Load(), nil
}

// setSafePoint raises the cached safe point to sp and restarts its TTL.
func (db *DB) setSafePoint(sp uint64) {
	db.spMu.Lock()
	defer db.spMu.Unlock()
	if sp > db.safePoint.Load() {
		db.safePoint.Store(sp)
	}
	db.spRead = time.Now()
}
