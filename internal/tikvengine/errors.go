package tikvengine

import (
	"context"
	"errors"
	"fmt"

	tikverr "github.com/tikv/client-go/v2/error"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvcall"
	"github.com/trickle-dev/trickle/store"
)

// ErrTxnDone is returned by a transaction used after Transact's fn
// returned.
var ErrTxnDone = errors.New("tikvengine: transaction already finished")

// failIn is fail for a request made under ctx: once ctx ended, what the
// client reports (an interrupted query, once watch stopped it) is the
// context's error, unless the outcome of a commit is unknown, which the
// caller must learn whatever ended it.
func failIn(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !tikvcall.Undetermined(err) {
		return fmt.Errorf("tikvengine: %s: %w (%v)", what, cerr, err)
	}
	return fail(what, err)
}

// fail turns an error of the TiKV client into the engine's vocabulary
// (engine's errors), keeping the client's text.
func fail(what string, err error) error {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("tikvengine: %s: %w", what, err)
	case tikvcall.Undetermined(err):
		return fmt.Errorf("tikvengine: %s: %w: %w (%v)", what, engine.ErrCommitUnknown, store.ErrUnavailable, err)
	case tikverr.IsErrNotFound(err):
		return fmt.Errorf("tikvengine: %s: %w", what, engine.ErrNotFound)
	case conflict(err):
		return fmt.Errorf("tikvengine: %s: %w (%v)", what, engine.ErrConflict, err)
	case tooOld(err):
		return fmt.Errorf("tikvengine: %s: %w (%v)", what, engine.ErrSnapshotTooOld, err)
	case tikvcall.Unreachable(err):
		return fmt.Errorf("tikvengine: %s: %w: %v", what, store.ErrUnavailable, err)
	case isTooLarge(err):
		return fmt.Errorf("tikvengine: %s: %w (%v)", what, ErrTooLarge, err)
	}
	return fmt.Errorf("tikvengine: %s: %w", what, err)
}

// conflict reports whether err says another transaction's write or lock
// is in the way: running again at a new snapshot may succeed.
func conflict(err error) bool {
	var latch *tikverr.ErrWriteConflictInLatch
	var retryable *tikverr.ErrRetryable
	var deadlock *tikverr.ErrDeadlock
	return tikverr.IsErrWriteConflict(err) || errors.As(err, &latch) || errors.As(err, &retryable) ||
		errors.As(err, &deadlock) || errors.Is(err, tikverr.ErrResolveLockTimeout) || errors.Is(err, tikverr.ErrLockWaitTimeout)
}

// tooOld reports whether err says a garbage collection passed the
// transaction's snapshot.
func tooOld(err error) bool {
	var aborted *tikverr.ErrTxnAbortedByGC
	var early *tikverr.ErrGCTooEarly
	return errors.As(err, &aborted) || errors.As(err, &early)
}

// noStartTimestamp is the error of a transaction whose start timestamp
// PD did not give: unless ctx ended, it matches store.ErrNoTimestamp,
// since the transaction wrote nothing (see engine.Retry).
func noStartTimestamp(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, store.ErrNoTimestamp) {
		return err
	}
	return fmt.Errorf("tikvengine: start timestamp: %w: %w", store.ErrNoTimestamp, err)
}

// isTooLarge reports whether err is client-go's refusal of a cell or a
// transaction over TiKV's size limits (which it reports with types
// that carry the sizes).
func isTooLarge(err error) bool {
	var entry *tikverr.ErrEntryTooLarge
	var txn *tikverr.ErrTxnTooLarge
	var key *tikverr.ErrKeyTooLarge
	return errors.As(err, &entry) || errors.As(err, &txn) || errors.As(err, &key)
}
