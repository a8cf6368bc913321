package percolator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/store"
)

// DB runs Percolator transactions over a Store with timestamps from an
// Oracle. Several DBs (in one process or many) may share one store and one
// oracle; each identifies its locks with its WorkerID.
type DB struct {
	st     store.Store
	or     Oracle
	opts   Options
	tracer trace.Tracer

	// active holds the running transactions and the safe point.
	active activeSet
	mu     sync.Mutex
	// givenUp holds the start timestamps of this DB's transactions that
	// failed to commit after prewriting, whose locks may be left behind;
	// see gaveUp.
	givenUp map[uint64]struct{}
	// committed remembers transactions known to have committed.
	committed committedCache
	// now is st if it can choose a read's timestamp (nil if not; see
	// store.TimestampReader), and seenTs the highest timestamp the oracle gave this
	// DB (see enterFloor).
	now      store.TimestampReader
	applyNow store.TimestampApplier // st if it can choose a commit's timestamp
	chooser  store.TimestampChooser // st if it can say whether it can now
	seenTs   atomic.Uint64
	// atomic is st if a transaction may commit in one phase (see
	// onePhaseCommit); onePhaseOffUntil is when, in Unix nanoseconds, to
	// try again after it said it could not.
	atomic           store.AtomicApplier
	onePhaseOffUntil atomic.Int64

	stats Stats
}

// Stats counts protocol events since the DB was opened.
type Stats struct {
	Committed      atomic.Uint64 // transactions that reached their commit point
	Conflicts      atomic.Uint64 // commits that failed with ErrConflict
	LockWaits      atomic.Uint64 // times a read backed off from a live lock
	RolledForward  atomic.Uint64 // cells a resolver committed for a committed primary
	RolledBack     atomic.Uint64 // cells a resolver rolled back
	PrimaryAborted atomic.Uint64 // primaries a resolver rolled back as abandoned
	Aborted        atomic.Uint64 // read-write transactions ended without committing, not by a conflict
}

// New returns a DB over st and or. opts may be nil.
func New(st store.Store, or Oracle, opts *Options) (*DB, error) {
	if st == nil || or == nil {
		return nil, fmt.Errorf("%w: store and oracle are required", ErrInvalidOptions)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	db := &DB{st: st, or: or, opts: o}
	db.now, _ = st.(store.TimestampReader)
	db.applyNow, _ = st.(store.TimestampApplier)
	db.chooser, _ = st.(store.TimestampChooser)
	if !o.DisableOnePhase {
		db.atomic, _ = st.(store.AtomicApplier)
	}
	db.tracer = o.TracerProvider.Tracer(instrumentationName)
	if err := db.registerMetrics(); err != nil {
		o.Logger.Warn("framework metrics unavailable", "err", err)
	}
	sp, err := loadSafePoint(context.Background(), st)
	if err != nil {
		return nil, err
	}
	db.active.safePoint.Store(sp)
	return db, nil
}

// Options returns the options in effect (with defaults filled in).
func (db *DB) Options() Options { return db.opts }

// Stats returns the DB's protocol counters.
func (db *DB) Stats() *Stats { return &db.stats }

// Counts returns the committed and conflicted totals of Stats.
func (db *DB) Counts() engine.Counts {
	return engine.Counts{Committed: db.stats.Committed.Load(), Conflicts: db.stats.Conflicts.Load()}
}

// Store returns the store the DB runs on.
func (db *DB) Store() store.Store { return db.st }

// SafePoint returns the current garbage collection safe point: snapshots at
// or above it are complete.
func (db *DB) SafePoint() uint64 { return db.active.safePoint.Load() }

// Begin starts a transaction at a fresh timestamp from the oracle. The
// caller must finish it with Commit or Rollback. Its span (see package
// doc) is a child of the span in ctx.
func (db *DB) Begin(ctx context.Context) (*Txn, error) {
	_, tx, err := db.begin(ctx, 0)
	return tx, err
}

// begin starts a transaction and its span, returning ctx with the span.
func (db *DB) begin(ctx context.Context, attempt int) (context.Context, *Txn, error) {
	ctx, span := db.tracer.Start(ctx, "txn")
	// Registered at a floor while the timestamp is drawn, the transaction
	// is covered by OldestActive from before the oracle gives it its
	// timestamp: a collector that drew a later one and then read this
	// process's report cannot miss it.
	floor := db.enterFloor()
	defer db.active.leave(floor)
	for {
		ts, err := db.or.Timestamp(ctx)
		if err != nil {
			err = noStartTimestamp(err)
			endSpanError(span, err)
			return ctx, nil, err
		}
		db.saw(ts)
		tx, err := db.BeginAt(ts)
		// A garbage collection may have moved the safe point past a
		// timestamp drawn just before it; draw again.
		if errors.Is(err, ErrSnapshotTooOld) {
			continue
		}
		if err != nil {
			endSpanError(span, err)
			return ctx, nil, err
		}
		tx.span = span
		if span.IsRecording() {
			span.SetAttributes(attrStartTs.Int64(int64(ts)))
			if attempt > 0 {
				span.SetAttributes(attrAttempt.Int(attempt))
			}
		}
		return ctx, tx, nil
	}
}

// BeginAt starts a transaction whose snapshot is at startTs, which must
// come from the oracle. It fails with ErrSnapshotTooOld below the safe point.
// Without the lease of Options.Lease it fails with ErrLeaseLost.
func (db *DB) BeginAt(startTs uint64) (*Txn, error) {
	term, err := db.leaseTerm()
	if err != nil {
		return nil, err
	}
	if sp, ok := db.active.enter(startTs); !ok {
		return nil, fmt.Errorf("%w: start %d is below safe point %d", ErrSnapshotTooOld, startTs, sp)
	}
	return &Txn{db: db, startTs: startTs, entered: startTs, term: term, begun: time.Now(), span: noSpan}, nil
}

func (db *DB) finish(startTs uint64) {
	db.active.leave(startTs)
}

// maxGivenUp bounds DB.givenUp; past it, an arbitrary entry is dropped and
// its locks, if any are left, wait for their TTL like anyone else's.
const maxGivenUp = 4096

// giveUp records that the transaction at startTs ended without committing
// and may have left locks.
func (db *DB) giveUp(startTs uint64) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.givenUp == nil {
		db.givenUp = make(map[uint64]struct{})
	}
	if len(db.givenUp) >= maxGivenUp {
		for ts := range db.givenUp {
			delete(db.givenUp, ts)
			break
		}
	}
	db.givenUp[startTs] = struct{}{}
}

// gaveUp reports whether this DB's transaction at startTs ended without
// committing (see giveUp).
func (db *DB) gaveUp(startTs uint64) bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	_, ok := db.givenUp[startTs]
	return ok
}

// OldestActive returns the start timestamp of the oldest transaction
// running in this DB, or 0 if none is. Processes publish it so that a
// cluster-wide garbage collection does not pass their transactions.
func (db *DB) OldestActive() uint64 {
	if ts := db.active.oldest(^uint64(0)); ts != ^uint64(0) {
		return ts
	}
	return 0
}

// Update runs fn in a read-write transaction and commits it, running it
// again as engine.Retry says.
//
// On a conflict it runs fn again in a new transaction, with a new start
// timestamp, after an exponential backoff: fn re-reads everything, so no
// stale write is ever applied blindly. So it does when a garbage
// collection passed the transaction (ErrSnapshotTooOld: this process
// stopped reporting it, for one, while it was paused). An attempt that
// failed because no start or commit timestamp could be drawn
// (store.ErrNoTimestamp: the transaction certainly did not commit) is run
// again the same way, at most engine.TimestampRetries times, so that a
// brief outage of the oracle does not fail the update and a lasting one
// fails it within a few backoffs. fn must not commit or roll back the
// transaction; an error from fn rolls it back and is returned as is.
func (db *DB) Update(ctx context.Context, fn func(ctx context.Context, tx *Txn) error) error {
	return engine.Retry(ctx, db.opts.MaxAttempts, db.opts.RetryBackoffMin, db.opts.RetryBackoffMax, func(attempt int) error {
		return db.attempt(ctx, fn, attempt)
	})
}

func (db *DB) attempt(ctx context.Context, fn func(ctx context.Context, tx *Txn) error, attempt int) error {
	ctx, tx, err := db.start(ctx, attempt)
	if err != nil {
		return err
	}
	tx.managed = true
	if err := fn(ctx, tx); err != nil {
		tx.fail(err)
		return err
	}
	return tx.commit(ctx)
}

// start starts a managed transaction (Update's, View's): over a store that
// can choose a read's timestamp (see store.TimestampReader), one whose snapshot its
// first read chooses in the store, which saves the oracle's round trip;
// else one at a timestamp drawn from the oracle now.
func (db *DB) start(ctx context.Context, attempt int) (context.Context, *Txn, error) {
	if db.now != nil && db.chooses() {
		return db.beginLazy(ctx, attempt)
	}
	return db.begin(ctx, attempt)
}

// View runs fn in a read-only snapshot transaction. Over a store that
// can choose a read's timestamp (see store.TimestampReader), the snapshot is chosen by
// the transaction's first read, in the store, which saves the oracle's
// round trip; Update's transactions start the same way.
func (db *DB) View(ctx context.Context, fn func(ctx context.Context, tx *Txn) error) error {
	ctx, tx, err := db.start(ctx, 0)
	if err != nil {
		return err
	}
	tx.managed, tx.readOnly = true, true
	defer tx.discard()
	return fn(ctx, tx)
}

// noStartTimestamp is the error of a transaction whose start timestamp
// the oracle did not give: it matches store.ErrNoTimestamp, since the
// transaction wrote nothing (see engine.Retry).
func noStartTimestamp(err error) error {
	if errors.Is(err, store.ErrNoTimestamp) {
		return fmt.Errorf("framework: begin: %w", err)
	}
	return fmt.Errorf("framework: begin: %w: %w", store.ErrNoTimestamp, err)
}
