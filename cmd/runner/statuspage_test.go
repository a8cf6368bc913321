package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex/ui"
	"github.com/trickle-dev/trickle/runner"
)

// TestStatusSamplesFeedTheCharts: the sampler adds a sample per
// gathering, with each observer's backlog and the runner's counters, skips
// a gathering that fails, and stops with its context.
func TestStatusSamplesFeedTheCharts(t *testing.T) {
	h := ui.NewHistory(time.Hour)
	var calls atomic.Int64
	status := func(context.Context) (*ui.Status, error) {
		n := calls.Add(1)
		if n == 2 {
			return nil, errors.New("NATS unreachable")
		}
		return &ui.Status{Taken: time.Unix(n, 0), Observers: []ui.ObserverStatus{{Name: "webindex-page", Pending: int(10 - n), Lag: time.Duration(n) * time.Second}}}, nil
	}
	stats := func() runner.Stats { return runner.Stats{Committed: uint64(calls.Load()) * 100, Runs: 7, Conflicts: 1} }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sampleStatus(ctx, status, stats, h, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	deadline := time.Now().Add(30 * time.Second)
	for len(h.Samples()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d samples after %d gatherings, want 3", len(h.Samples()), calls.Load())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	s := h.Samples()
	if s[0].At != time.Unix(1, 0) || s[1].At != time.Unix(3, 0) {
		t.Errorf("samples at %v, %v: want the first and third gatherings (the second failed)", s[0].At, s[1].At)
	}
	if o := s[1].Observers; len(o) != 1 || o[0].Name != "webindex-page" || o[0].Pending != 7 || o[0].Lag != 3*time.Second {
		t.Errorf("the observer in a sample: %+v", o)
	}
	if s[1].Committed != 300 || s[1].Runs != 7 || s[1].Conflicts != 1 {
		t.Errorf("the counters in a sample: %+v", s[1])
	}
}

// Rule: an export queue's lag on the status page is how long its oldest
// entry has waited, however recently its drain re-notified itself; other
// observers keep theirs, and an empty queue adds nothing.
func TestAnExportQueuesLagIsItsOldestEntrysAge(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	obs := []ui.ObserverStatus{{Name: "export-webindex", Lag: 200 * time.Millisecond}, {Name: "webindex-page", Lag: time.Second}}
	queueLag(obs, ui.ExportStatus{Observer: "export-webindex", Entries: 40, Oldest: now.Add(-90 * time.Second)}, now)
	if obs[0].Lag != 90*time.Second || obs[1].Lag != time.Second {
		t.Errorf("lags %v, %v; want the queue's 1m30s and the page observer's 1s", obs[0].Lag, obs[1].Lag)
	}
	queueLag(obs, ui.ExportStatus{Observer: "webindex-page"}, now)
	if obs[1].Lag != time.Second {
		t.Errorf("an empty queue changed a lag: %v", obs[1].Lag)
	}
}

// Rule: sampling waits its interval, or twenty times what the last
// gathering took when that is longer, so that a long backlog (which a
// gathering reads) never makes sampling more than a twentieth of the time.
func TestSlowGatheringsAreSampledLessOften(t *testing.T) {
	if got := nextSample(15*time.Second, 100*time.Millisecond); got != 15*time.Second {
		t.Errorf("after a fast gathering: %v, want the interval", got)
	}
	if got := nextSample(15*time.Second, 2*time.Second); got != 40*time.Second {
		t.Errorf("after a gathering of 2s: %v, want 40s", got)
	}
}
