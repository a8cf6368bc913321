// Package retry is how the project waits between attempts: one backoff
// (exponential, capped, jittered) and one sleep that a context cuts short.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff returns the pause before attempt (counted from 1): lo doubled
// per attempt, capped at hi, then drawn at random from its upper half, so
// that processes that failed together do not retry in lockstep.
func Backoff(attempt int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < attempt && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + rand.N(d/2+1)
}

// Sleep waits for d, or until ctx ends, and then returns ctx's error.
// An ended context is an error even when the pause was over too (a
// select between the two picks either), so that a retry loop stops
// however short its pauses.
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return ctx.Err()
}
