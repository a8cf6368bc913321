package percolator

import (
	"errors"
	"fmt"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/store"
)

// Errors returned by transactions. Test for them with errors.Is.
var (
	// ErrConflict is matched by every conflict that a retry with a new start
	// timestamp may resolve: write conflicts, lock conflicts and being rolled
	// back by another transaction. Update retries on it.
	ErrConflict = engine.ErrConflict
	// ErrWriteConflict: another transaction committed a cell this one writes
	// after this one started (first committer wins).
	ErrWriteConflict = errors.New("framework: write conflict")
	// ErrLockConflict: another live transaction holds a lock on a cell this
	// one writes.
	ErrLockConflict = errors.New("framework: lock conflict")
	// ErrAborted: this transaction was rolled back (a reader judged it
	// abandoned) before it reached its commit point.
	ErrAborted = errors.New("framework: transaction aborted")
	// ErrCommitUnknown: the commit point was attempted but its answer was
	// lost (the store stopped answering): the transaction may or may not
	// have committed. Update does not retry it.
	ErrCommitUnknown = engine.ErrCommitUnknown
	// ErrNotFound: the cell has no value in the transaction's snapshot.
	ErrNotFound = engine.ErrNotFound
	// ErrSnapshotTooOld: the start timestamp is below the garbage collection
	// safe point, so the snapshot may be incomplete.
	ErrSnapshotTooOld = engine.ErrSnapshotTooOld
	// ErrTxnDone: the transaction was already committed or rolled back.
	ErrTxnDone = errors.New("framework: transaction already finished")
	// ErrManaged: Commit or Rollback called on a transaction run by Update or
	// View, which finish it themselves.
	ErrManaged = errors.New("framework: managed transaction cannot be committed or rolled back by its function")
	// ErrReadOnly: a write in a View.
	ErrReadOnly = engine.ErrReadOnly
	// ErrUnguarded: the transaction writes a guarded cell (see GuardSet)
	// without writing its guard. Nothing was written.
	ErrUnguarded = engine.ErrUnguarded
	// ErrInvalidKey is wrapped by errors about a malformed table, row or
	// column.
	ErrInvalidKey = engine.ErrInvalidKey
	// ErrCrashed is returned when a fault injected through Options.Faults
	// stopped a commit.
	ErrCrashed = errors.New("framework: commit stopped by injected fault")
)

// ConflictError describes a conflict: which cell, and what was in the way.
type ConflictError struct {
	// Kind is ErrWriteConflict, ErrLockConflict or ErrAborted.
	Kind   error
	Table  string
	Row    []byte
	Column store.Column
	// StartTs is this transaction's start timestamp.
	StartTs uint64
	// OtherTs is the commit timestamp of the conflicting write, or the start
	// timestamp of the conflicting lock.
	OtherTs uint64
	// Holder is the worker holding the conflicting lock, if any.
	Holder string
}

func (e *ConflictError) Error() string {
	s := fmt.Sprintf("%v on %s/%q/%s (start %d, other %d", e.Kind, e.Table, e.Row, e.Column, e.StartTs, e.OtherTs)
	if e.Holder != "" {
		s += ", holder " + e.Holder
	}
	return s + ")"
}

// Is makes a ConflictError match ErrConflict and its own Kind.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict || target == e.Kind }

// CrashError reports the commit step at which an injected fault stopped a
// commit.
type CrashError struct {
	Step    CommitStep
	StartTs uint64
	Err     error
}

func (e *CrashError) Error() string {
	return fmt.Sprintf("framework: commit of %d stopped at %s: %v", e.StartTs, e.Step, e.Err)
}

// Is makes a CrashError match ErrCrashed.
func (e *CrashError) Is(target error) bool { return target == ErrCrashed }

// Unwrap returns the injected error.
func (e *CrashError) Unwrap() error { return e.Err }
