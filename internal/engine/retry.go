package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trickle-dev/trickle/internal/retry"
	"github.com/trickle-dev/trickle/store"
)

// TimestampRetries is how many times Retry runs a transaction again after
// attempts that failed for want of a timestamp.
const TimestampRetries = 3

// Retry runs the attempts at a read-write transaction, the same on every
// engine.
//
// It calls attempt (numbered from 1) until it returns nil or an error
// that running it again cannot mend. An attempt that failed with
// ErrConflict or ErrSnapshotTooOld is run again: a new snapshot sees the
// conflict's winner and starts above any safe point. One that failed with
// store.ErrNoTimestamp (no timestamp could be drawn for it, its start's
// or its commit's, so it certainly did not commit) is run again at most
// TimestampRetries times, while ctx lasts, so that a brief outage of the
// oracle (PD, for TiKV) does not fail the transaction. Any other error is
// returned as it is. Between attempts it backs off (retry.Backoff between
// backoffMin and backoffMax); with maxAttempts > 0 it gives up after that
// many attempts, returning the last error wrapped.
func Retry(ctx context.Context, maxAttempts int, backoffMin, backoffMax time.Duration, attempt func(n int) error) error {
	noTimestamp := 0
	for n := 1; ; n++ {
		err := attempt(n)
		if err == nil {
			return nil
		}
		switch {
		case errors.Is(err, ErrConflict), errors.Is(err, ErrSnapshotTooOld):
		case !errors.Is(err, store.ErrNoTimestamp) || ctx.Err() != nil || noTimestamp == TimestampRetries:
			return err
		default:
			noTimestamp++
		}
		if maxAttempts > 0 && n >= maxAttempts {
			return fmt.Errorf("framework: giving up after %d attempts: %w", n, err)
		}
		if serr := retry.Sleep(ctx, retry.Backoff(n, backoffMin, backoffMax)); serr != nil {
			return fmt.Errorf("framework: giving up after %d attempts: %w (last attempt: %v)", n, serr, err)
		}
	}
}
