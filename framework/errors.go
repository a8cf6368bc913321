package framework

import (
	"errors"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/enginechoice"
)

// Errors of the framework. Test for them with errors.Is: the errors
// returned carry more detail (which cell, which transaction) around them.
// They are the transaction engine's own, so that an error means one thing
// wherever it comes from.
var (
	// ErrConflict means a transaction could not commit because of another
	// one: a write committed after it started to a cell it writes (first
	// committer wins), a live lock on such a cell, or being rolled back by
	// a reader that judged it abandoned. Update runs its function again at
	// a new snapshot on it; it reaches the caller when MaxAttempts runs
	// out.
	ErrConflict = engine.ErrConflict
	// ErrNotFound means the cell has no value in the transaction's
	// snapshot (Txn.Get). Txn.Lookup reports it as found=false instead.
	ErrNotFound = engine.ErrNotFound
	// ErrCommitUnknown means the commit was cut short at its commit point,
	// typically by a store that stopped answering: the transaction may or
	// may not have committed. Update does not retry it, since running the
	// function again could apply its effect twice; a caller whose work is
	// idempotent may retry, others should read back to find out.
	ErrCommitUnknown = engine.ErrCommitUnknown
	// ErrSnapshotTooOld means the transaction's start timestamp is below
	// the garbage collection safe point: its snapshot may be incomplete.
	// A collection passed it (its process was paused past its liveness
	// TTL, say): its reads fail, and the store refuses its commit. Update
	// runs its function again at a new snapshot on it.
	ErrSnapshotTooOld = engine.ErrSnapshotTooOld
	// ErrLeaseLost means this process's liveness lapsed (it was paused,
	// or could not refresh its token, longer than its TTL): a collection
	// may pass its transactions, so none begins until the token is
	// written again, which the process does by itself. It matches
	// store.ErrUnavailable too: wait and try again.
	ErrLeaseLost = engine.ErrLeaseLost
	// ErrInvalidKey means a table, row or column is empty or reserved
	// (names starting with "__" belong to the framework).
	ErrInvalidKey = engine.ErrInvalidKey
	// ErrReadOnly means a write in a View.
	ErrReadOnly = engine.ErrReadOnly
	// ErrNotWeak means NotifyWeak named a column no weak observer observes.
	ErrNotWeak = engine.ErrNotWeak
	// ErrUnguarded means a transaction wrote a cell of a guarded family
	// (see Guard) without writing the cell's guard, or a cell of a family
	// the runners declared guarded whose guard this DB does not know.
	// Nothing was written.
	ErrUnguarded = engine.ErrUnguarded
	// ErrInvalidOptions means an Options field is out of range.
	ErrInvalidOptions = engine.ErrInvalidOptions
	// ErrFutureSnapshot means DB.ViewAt was asked for a timestamp above
	// every one the oracle has handed out: commits below it may still
	// happen, so a read there could change.
	ErrFutureSnapshot = engine.ErrFutureSnapshot
	// ErrTooLarge means a cell or a transaction is over what the store
	// takes (on TiKV, a cell over its 6 MiB entry limit, refused at Set
	// with the cell named, or a transaction over client-go's size limit).
	// Nothing was written; split the value or the transaction.
	ErrTooLarge = engine.ErrTooLarge
	// ErrEngineMismatch means Open could not run the engine chosen on the
	// store: the store's data belongs to another engine (recorded when a
	// DB first opened on it), or the engine needs a store this one is not
	// (EngineTiKV on a store that is not TiKV's and unwraps to none).
	// Nothing was opened; set Options.Engine to the deployment's engine.
	ErrEngineMismatch = enginechoice.ErrMismatch
	// ErrInvalidObserver means Register refused an observer: a missing
	// name or function, a bad kind or column, a name or column registered
	// twice, or a registry already in use by a runner.
	ErrInvalidObserver = errors.New("framework: invalid observer")
	// ErrNoObservedColumns means Open could not tell which columns are
	// observed: no runner published them in the store and Options.Observers
	// is nil. Writing without knowing would store changes no observer ever
	// sees.
	ErrNoObservedColumns = errors.New("framework: observed columns unknown")
)
