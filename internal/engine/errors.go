package engine

import (
	"errors"

	"github.com/trickle-dev/trickle/store"
)

// The errors every engine's transactions return, so that the front and
// the observer runtime test for one vocabulary whichever engine runs
// (framework re-exports them, where each is documented). Engines wrap
// them with what happened and where.
var (
	ErrConflict       = errors.New("framework: transaction conflict")
	ErrNotFound       = errors.New("framework: not found")
	ErrCommitUnknown  = errors.New("framework: commit outcome unknown")
	ErrSnapshotTooOld = errors.New("framework: snapshot too old")
	ErrInvalidKey     = errors.New("framework: invalid key")
	ErrReadOnly       = errors.New("framework: read-only transaction")
	ErrNotWeak        = errors.New("framework: column is not observed by a weak observer")
	ErrUnguarded      = errors.New("framework: guarded cell written without its guard")
	ErrInvalidOptions = errors.New("framework: invalid options")
	ErrFutureSnapshot = errors.New("framework: snapshot in the future")
	ErrTooLarge       = errors.New("framework: too large for the store")
	// ErrLeaseLost also matches store.ErrUnavailable: like a store that
	// cannot be reached, it says nothing was read that can be trusted, and
	// the process may retry once it is back.
	ErrLeaseLost error = leaseLostError{}
)

type leaseLostError struct{}

func (leaseLostError) Error() string {
	return "framework: this process's liveness lapsed: a garbage collection may pass its transactions"
}

// Is makes errors.Is(err, store.ErrUnavailable) true.
func (leaseLostError) Is(target error) bool { return target == store.ErrUnavailable }
