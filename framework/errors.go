package framework

import (
	"errors"

	"github.com/trickle-dev/trickle/internal/percolator"
)

// Errors of the framework. Test for them with errors.Is: the errors
// returned carry more detail (which cell, which transaction) around them.
var (
	// ErrConflict means a transaction could not commit because of another
	// one: a write committed after it started to a cell it writes (first
	// committer wins), a live lock on such a cell, or being rolled back by
	// a reader that judged it abandoned. Update runs its function again at
	// a new snapshot on it; it reaches the caller when MaxAttempts runs
	// out.
	ErrConflict = errors.New("framework: transaction conflict")
	// ErrNotFound means the cell has no value in the transaction's
	// snapshot (Txn.Get). Txn.Lookup reports it as found=false instead.
	ErrNotFound = errors.New("framework: not found")
	// ErrCommitUnknown means the commit was cut short at its commit point,
	// typically by a store that stopped answering: the transaction may or
	// may not have committed. Update does not retry it, since running the
	// function again could apply its effect twice; a caller whose work is
	// idempotent may retry, others should read back to find out.
	ErrCommitUnknown = errors.New("framework: commit outcome unknown")
	// ErrSnapshotTooOld means the transaction's start timestamp is below
	// the garbage collection safe point: its snapshot may be incomplete.
	// A collection passed it (its process was paused past its liveness
	// TTL, say): its reads fail, and the store refuses its commit. Update
	// runs its function again at a new snapshot on it.
	ErrSnapshotTooOld = errors.New("framework: snapshot too old")
	// ErrLeaseLost means this process's liveness lapsed (it was paused,
	// or could not refresh its token, longer than its TTL): a collection
	// may pass its transactions, so none begins until the token is
	// written again, which the process does by itself. It matches
	// store.ErrUnavailable too: wait and try again.
	ErrLeaseLost = errors.New("framework: liveness lapsed")
	// ErrInvalidKey means a table, row or column is empty or reserved
	// (names starting with "__" belong to the framework).
	ErrInvalidKey = errors.New("framework: invalid key")
	// ErrReadOnly means a write in a View.
	ErrReadOnly = errors.New("framework: read-only transaction")
	// ErrNotWeak means NotifyWeak named a column no weak observer observes.
	ErrNotWeak = errors.New("framework: column is not observed by a weak observer")
	// ErrInvalidObserver means Register refused an observer: a missing
	// name or function, a bad kind or column, a name or column registered
	// twice, or a registry already in use by a runner.
	ErrInvalidObserver = errors.New("framework: invalid observer")
	// ErrNoObservedColumns means Open could not tell which columns are
	// observed: no runner published them in the store and Options.Observers
	// is nil. Writing without knowing would store changes no observer ever
	// sees.
	ErrNoObservedColumns = errors.New("framework: observed columns unknown")
	// ErrUnguarded means a transaction wrote a cell of a guarded family
	// (see Guard) without writing the cell's guard. Nothing was written.
	ErrUnguarded = errors.New("framework: guarded cell written without its guard")
	// ErrInvalidOptions means an Options field is out of range.
	ErrInvalidOptions = errors.New("framework: invalid options")
	// ErrFutureSnapshot means DB.ViewAt was asked for a timestamp above
	// every one the oracle has handed out: commits below it may still
	// happen, so a read there could change.
	ErrFutureSnapshot = errors.New("framework: snapshot in the future")
)

// engineErrors maps the errors above to the transaction engine's.
var engineErrors = map[error]error{
	ErrConflict:       percolator.ErrConflict,
	ErrNotFound:       percolator.ErrNotFound,
	ErrCommitUnknown:  percolator.ErrCommitUnknown,
	ErrSnapshotTooOld: percolator.ErrSnapshotTooOld,
	ErrLeaseLost:      percolator.ErrLeaseLost,
	ErrInvalidKey:     percolator.ErrInvalidKey,
	ErrReadOnly:       percolator.ErrReadOnly,
	ErrNotWeak:        percolator.ErrNotWeak,
	ErrInvalidOptions: percolator.ErrInvalidOptions,
	ErrUnguarded:      percolator.ErrUnguarded,
	ErrFutureSnapshot: percolator.ErrFutureSnapshot,
}

// engineError is an error of the transaction engine as the framework
// returns it: same text and chain, and matched by the errors above.
type engineError struct{ err error }

func (e engineError) Error() string { return e.err.Error() }
func (e engineError) Unwrap() error { return e.err }

// Is matches the framework's error that stands for an engine error in the
// chain.
func (e engineError) Is(target error) bool {
	inner, ok := engineErrors[target]
	return ok && errors.Is(e.err, inner)
}

// wrapErr is how every engine error leaves the framework.
func wrapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case err == percolator.ErrNotFound:
		return ErrNotFound
	}
	return engineError{err}
}
