package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/store"
)

// retryWith runs Retry with attempts that fail with errs in turn (nil
// once they run out) and returns its error and how many attempts ran.
func retryWith(ctx context.Context, maxAttempts int, errs ...error) (error, int) {
	runs := 0
	err := Retry(ctx, maxAttempts, time.Microsecond, time.Microsecond, func(n int) error {
		runs++
		if n != runs {
			panic(fmt.Sprintf("attempt numbered %d, want %d", n, runs))
		}
		if n <= len(errs) {
			return errs[n-1]
		}
		return nil
	})
	return err, runs
}

// Rule: conflicts and passed snapshots run again, until an attempt
// commits or maxAttempts ran, the last error wrapped.
func TestRetryRunsConflictsAgainUpToMaxAttempts(t *testing.T) {
	err, runs := retryWith(context.Background(), 5, ErrConflict, ErrSnapshotTooOld)
	if err != nil || runs != 3 {
		t.Errorf("two retryable failures then success: err %v after %d runs, want nil after 3", err, runs)
	}
	err, runs = retryWith(context.Background(), 3, ErrConflict, ErrConflict, ErrConflict, ErrConflict)
	if !errors.Is(err, ErrConflict) || runs != 3 {
		t.Errorf("conflicts past MaxAttempts 3: err %v after %d runs, want ErrConflict after 3", err, runs)
	}
}

// Rule: a transaction that got no timestamp runs again at most
// TimestampRetries times; one that failed otherwise is not run again.
func TestRetryRunsNoTimestampAFewTimesOnly(t *testing.T) {
	nots := make([]error, TimestampRetries+2)
	for i := range nots {
		nots[i] = fmt.Errorf("oracle down: %w", store.ErrNoTimestamp)
	}
	err, runs := retryWith(context.Background(), 0, nots[:TimestampRetries]...)
	if err != nil || runs != TimestampRetries+1 {
		t.Errorf("a brief outage: err %v after %d runs, want nil after %d", err, runs, TimestampRetries+1)
	}
	err, runs = retryWith(context.Background(), 0, nots...)
	if !errors.Is(err, store.ErrNoTimestamp) || runs != TimestampRetries+1 {
		t.Errorf("a lasting outage: err %v after %d runs, want ErrNoTimestamp after %d", err, runs, TimestampRetries+1)
	}
	other := errors.New("the observer's own error")
	if err, runs = retryWith(context.Background(), 0, other); err != other || runs != 1 {
		t.Errorf("another error: %v after %d runs, want it as is after 1", err, runs)
	}
}

// Rule: an ended context stops the retries of timestamp failures and
// of conflicts alike.
func TestRetryStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err, runs := retryWith(ctx, 0, fmt.Errorf("x: %w", store.ErrNoTimestamp), nil)
	if !errors.Is(err, store.ErrNoTimestamp) || runs != 1 {
		t.Errorf("no timestamp, context ended: err %v after %d runs, want ErrNoTimestamp after 1", err, runs)
	}
	err, runs = retryWith(ctx, 0, ErrConflict, ErrConflict)
	if !errors.Is(err, context.Canceled) || runs != 1 {
		t.Errorf("conflict, context ended: err %v after %d runs, want context.Canceled after 1", err, runs)
	}
}
