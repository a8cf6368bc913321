package cluster

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Rule: a worker's lease holds while its token cannot have expired on the
// server — less than TTL (less a margin) after the last write was sent, on
// this process's clock — so a process that was paused, or whose refreshes
// kept failing, knows at once that a collector may pass it. A token found
// gone ends the term: OnLapse runs first (the worker adopts what a
// collection did), and the worker registers again only once it succeeded.
func TestLivenessLeaseFollowsItsToken(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx := testCtx(t)
	var lapses atomic.Int32
	var failLapse atomic.Bool
	var w *Liveness
	w = newLiveness(t, js, "w", LivenessOptions{TTL: steadyTTL, OnLapse: func(context.Context) error {
		lapses.Add(1)
		if _, held := w.Held(); held {
			t.Error("OnLapse ran while the lease still held")
		}
		if failLapse.Load() {
			return errors.New("the store is out of reach")
		}
		return nil
	}})
	obs := observer(t, js)
	start := time.Now()
	var elapsed atomic.Int64
	clock := func() time.Time { return start.Add(time.Duration(elapsed.Load())) }
	w.leaseClock.Store(&clock)
	step := func(d time.Duration) { elapsed.Add(int64(d)) }

	term, held := w.Held()
	if !held || term != 1 {
		t.Fatalf("a new worker's lease: term %d, held %v", term, held)
	}
	step(steadyTTL - steadyTTL/leaseMargin - time.Second)
	if _, held := w.Held(); !held {
		t.Fatal("the lease lapsed before TTL less the margin")
	}
	step(time.Second) // paused (or unrefreshed) that long: the token may be gone
	if _, held := w.Held(); held {
		t.Fatal("the lease outlived its token's TTL less the margin")
	}
	// The token was still there: a refresh takes the lease back in the
	// same term, and nothing lapsed.
	if err := w.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if term, held := w.Held(); !held || term != 1 || lapses.Load() != 0 {
		t.Fatalf("after a refresh of a live token: term %d, held %v, %d lapses", term, held, lapses.Load())
	}

	// The token expires (its server's clock): the next refresh ends the
	// term, adopts, and registers again.
	if err := w.kv.Purge(ctx, w.key); err != nil {
		t.Fatal(err)
	}
	if err := w.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if term, held := w.Held(); !held || term != 2 || lapses.Load() != 1 || !alive(t, obs, "w") {
		t.Fatalf("after a lapse: term %d, held %v, %d lapses", term, held, lapses.Load())
	}

	// When OnLapse fails, the worker stays unregistered and its lease
	// lost until a refresh gets through it.
	failLapse.Store(true)
	if err := w.kv.Purge(ctx, w.key); err != nil {
		t.Fatal(err)
	}
	if err := w.Refresh(ctx); err == nil {
		t.Fatal("a refresh whose OnLapse failed succeeded")
	}
	if _, held := w.Held(); held || alive(t, obs, "w") {
		t.Fatal("registered again although OnLapse failed")
	}
	failLapse.Store(false)
	if err := w.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if term, held := w.Held(); !held || term <= 2 || !alive(t, obs, "w") {
		t.Fatalf("after OnLapse succeeded: term %d, held %v", term, held)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, held := w.Held(); held {
		t.Fatal("a closed worker's lease holds")
	}
}
