package framework

import (
	"context"
	"fmt"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/enginechoice"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/internal/published"
	"github.com/trickle-dev/trickle/store"
)

// DB runs transactions over a store, with timestamps from an oracle. Any
// number of DBs, in one process or many, may share one store and oracle.
// A DB is safe for concurrent use.
type DB engine.DB

func (db *DB) engine() engine.Engine { return (*engine.DB)(db).Engine() }

// Open returns a DB over st with timestamps from or. opts may be nil.
//
// It runs the engine opts.Engine names, or the one st declares (see
// Engine), never one guessed from st's type, and records it in st the
// first time: it fails with ErrEngineMismatch when st's data belongs to
// another engine, since a DB there would not see the deployment's writes.
//
// Its transactions notify the observers of the columns they write: the
// columns the runners published in st, and those of opts.Observers. They
// refuse to write a cell of a family the runners declared guarded (see
// Guard) unless opts.Observers declares its guard too (ErrUnguarded). When
// there are neither, Open fails with ErrNoObservedColumns rather than
// return a DB whose writes no observer would ever see; a program that runs
// no observers passes an empty Registry to say so.
func Open(ctx context.Context, st store.Store, or Oracle, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if st == nil || or == nil {
		return nil, fmt.Errorf("%w: a store and an oracle are required", ErrInvalidOptions)
	}
	choice, err := enginechoice.Choose(st, string(o.Engine))
	if err != nil {
		return nil, err
	}
	ps, err := published.Load(ctx, st)
	if err != nil {
		return nil, err
	}
	var observed engine.ObservedSet = ps
	switch {
	case o.Observers != nil && ps.Len() > 0:
		observed = published.Union(registrySet{o.Observers}, ps)
	case o.Observers != nil:
		observed = registrySet{o.Observers}
	case ps.Len() == 0:
		return nil, fmt.Errorf("%w: no runner has published observed columns in this store and Options.Observers is nil: start a runner once, or pass the observers' Registry (an empty one if there are none)", ErrNoObservedColumns)
	}
	// The store's first open bounds what as-of reads can show (ViewAt);
	// a timestamp drawn here is recorded only if this is that open.
	now, err := or.Timestamp(ctx)
	if err != nil {
		return nil, fmt.Errorf("framework: a timestamp for recording the store's first open: %w", err)
	}
	born, err := enginechoice.Record(ctx, st, choice, now)
	if err != nil {
		return nil, err
	}
	var guards engine.GuardSet
	if o.Observers != nil {
		guards = o.Observers
	}
	c := engine.Config{
		WorkerID:        o.WorkerID,
		Observed:        observed,
		Guards:          guards,
		DeclaredGuards:  ps,
		LockTTL:         o.LockTTL,
		History:         o.History,
		MaxAttempts:     o.MaxAttempts,
		RetryBackoffMin: o.RetryBackoffMin,
		RetryBackoffMax: o.RetryBackoffMax,
		Logger:          o.Logger,
		TracerProvider:  o.TracerProvider,
		MeterProvider:   o.MeterProvider,
	}
	if o.Liveness != nil {
		c.Liveness = o.Liveness
	}
	if o.Lease != nil {
		c.Lease = o.Lease
	}
	if f := o.Notified; f != nil {
		c.Notified = func(rows []engine.NotifiedRow) { f(notifiedRows(rows)) }
	}
	e, err := enginechoice.Open(ctx, st, or, choice, c)
	if err != nil {
		return nil, err
	}
	return (*DB)(engine.NewDBBorn(e, born)), nil
}

// notifiedRows is rows as the front names them (nil stays nil: too many
// to list).
func notifiedRows(rows []engine.NotifiedRow) []NotifiedRow {
	if rows == nil {
		return nil
	}
	out := make([]NotifiedRow, len(rows))
	for i, r := range rows {
		out[i] = NotifiedRow(r)
	}
	return out
}

// Update runs fn in a read-write transaction and commits it.
//
// On a conflict it runs fn again in a new transaction, at a new snapshot,
// after a backoff: fn reads everything again, so no stale write is ever
// applied blindly. So it does when a garbage collection passed the
// transaction (ErrSnapshotTooOld). An attempt that failed because no
// timestamp could be drawn for it, its start's or its commit's
// (store.ErrNoTimestamp: it certainly did not commit), is run again the
// same way, a few times at most, so that a brief outage of the oracle
// (PD's, on EngineTiKV) does not fail the update; every engine does so.
// An error from fn rolls the transaction back and is returned as is; fn
// cannot commit or roll back itself. Like View's, its snapshot may be
// chosen by its first read (see View); one that writes without reading
// takes it when it commits.
func (db *DB) Update(ctx context.Context, fn func(ctx context.Context, tx *Txn) error) error {
	return db.engine().Transact(ctx, engine.TxnOptions{}, front(fn))
}

// View runs fn in a read-only transaction: a consistent snapshot of the
// whole store as of its start. Over a store served by another process
// that also serves the oracle (a runner that does not own the data), the
// snapshot is chosen by the first read, in that process, which saves a
// round trip to the oracle; it still includes every commit that completed
// before View was called.
func (db *DB) View(ctx context.Context, fn func(ctx context.Context, tx *Txn) error) error {
	return db.engine().Transact(ctx, engine.TxnOptions{ReadOnly: true}, front(fn))
}

// front runs fn on the front's handle of the engine's transaction.
func front(fn func(ctx context.Context, tx *Txn) error) func(context.Context, engine.Txn) error {
	return func(ctx context.Context, tx engine.Txn) error { return fn(ctx, (*Txn)(engine.NewTx(tx))) }
}

// NotifyWeak asks the weak observer of (table, col) to look at row, outside
// any transaction. The request is durable when NotifyWeak returns.
func (db *DB) NotifyWeak(ctx context.Context, table string, row []byte, col Column) error {
	return db.engine().NotifyWeak(ctx, table, row, col)
}

// ObservedKind reports whether a write of (table, col) by this DB notifies
// an observer, and of which kind. Code that feeds a pipeline checks it to
// refuse a DB whose writes the pipeline would never see.
func (db *DB) ObservedKind(table string, col Column) (ObserverKind, bool) {
	k, ok := db.engine().ObservedKind(table, col)
	return ObserverKind(k), ok
}

// StoreOptions returns o (nil: defaults) with what the framework needs of
// a store it opens: notifications kept in their own locality group, so
// that looking for work never reads the data. Open stores the framework
// runs on with it.
func StoreOptions(o *store.Options) *store.Options { return protocol.StoreOptions(o) }
