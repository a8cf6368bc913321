package percolator

import (
	"context"
	"errors"
	"fmt"

	"github.com/trickle-dev/trickle/internal/engine"
)

// The engine over a store.Store: the framework's first engine.
var (
	_ engine.Engine = (*DB)(nil)
	_ engine.Txn    = (*Txn)(nil)
)

// Transact runs fn in a transaction as o says: Update's, View's or
// ViewAt's.
func (db *DB) Transact(ctx context.Context, o engine.TxnOptions, fn func(context.Context, engine.Txn) error) error {
	run := func(ctx context.Context, tx *Txn) error { return fn(ctx, tx) }
	switch {
	case o.At != 0:
		return db.ViewAt(ctx, o.At, run)
	case o.ReadOnly:
		return db.View(ctx, run)
	}
	return db.Update(ctx, run)
}

// ObservedKind reports whether a write of (table, col) by this DB
// notifies an observer, and of which kind.
func (db *DB) ObservedKind(table string, col Column) (ObserverKind, bool) {
	if db.opts.Observed == nil {
		return 0, false
	}
	return db.opts.Observed.ObservedKind(table, col)
}

// Setup returns the worker id and telemetry the DB was opened with.
func (db *DB) Setup() engine.Setup {
	return engine.Setup{WorkerID: db.opts.WorkerID, Logger: db.opts.Logger, TracerProvider: db.opts.TracerProvider, MeterProvider: db.opts.MeterProvider}
}

// ErrOtherEngine is returned by From for an engine that is not this
// package's: what needs this engine's own operations (garbage collection,
// bulk import, its statistics) is not available on it.
var ErrOtherEngine = errors.New("framework: not the engine over a store")

// From returns the DB behind e, for the operations only this engine has.
func From(e engine.Engine) (*DB, error) {
	if db, ok := e.(*DB); ok {
		return db, nil
	}
	return nil, fmt.Errorf("%w: %T", ErrOtherEngine, e)
}
