package loader_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex/loader"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/store"
)

// outageStore stops answering (store.ErrUnavailable, nothing applied) once
// a write of the page downAt begins, like a runner killed mid-load; it
// answers again after failing `failures` calls, or never if that is 0.
type outageStore struct {
	store.Store
	downAt   string
	failures int64
	down     atomic.Bool
	failed   atomic.Int64
}

func (s *outageStore) fail() bool {
	if !s.down.Load() {
		return false
	}
	if n := s.failed.Add(1); s.failures > 0 && n > s.failures {
		s.down.Store(false)
		return false
	}
	return true
}

func (s *outageStore) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	if txn.Table == schema.PagesTable && string(txn.Row) == s.downAt {
		s.down.CompareAndSwap(false, s.failed.Load() == 0)
	}
	if s.fail() {
		return store.RowResult{FailedCheck: -1}, fmt.Errorf("outage: %w", store.ErrUnavailable)
	}
	return s.Store.Apply(ctx, txn)
}

func (s *outageStore) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	for _, txn := range txns {
		if txn.Table == schema.PagesTable && string(txn.Row) == s.downAt {
			s.down.CompareAndSwap(false, s.failed.Load() == 0)
		}
	}
	if s.fail() {
		return nil, fmt.Errorf("outage: %w", store.ErrUnavailable)
	}
	return s.Store.ApplyAll(ctx, txns)
}

func (s *outageStore) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	if s.fail() {
		return nil, fmt.Errorf("outage: %w", store.ErrUnavailable)
	}
	return s.Store.ReadRow(ctx, table, row, cols, spans)
}

func tenPages() ([]input.Record, map[string]string) {
	var recs []input.Record
	want := map[string]string{}
	for i := range 10 {
		u := fmt.Sprintf("http://p%d.example/", i)
		recs = append(recs, put(u, html(u)))
		want[u] = u
	}
	return recs, want
}

// A store that stops answering for a while (its runner restarts, or another
// runner takes it over) costs the loader a pause, not pages: the batches
// that failed for want of an answer are retried.
func TestLoaderRidesOutAnOutage(t *testing.T) {
	base := newEnv(t)
	recs, want := tenPages()
	out := &outageStore{Store: base.st, downAt: "http://p3.example/", failures: 6}
	e := newEnvOn(t, out, base.ts)
	s, ps := e.load(records(recs...), loader.Options{Concurrency: 1, BatchSize: 1})
	if out.failed.Load() < 6 {
		t.Fatalf("the outage failed %d calls; the test proves nothing", out.failed.Load())
	}
	if !s.OK() || s.Loaded != 10 || len(ps) != 0 {
		t.Fatalf("summary %+v, problems %v", s.Counts, ps)
	}
	base.wantPages(want)
}

// A store that stops answering for good stops the run after
// Options.Unreachable: the summary counts the records read but not loaded,
// the error says why, and running the same load again completes it,
// leaving the pages already loaded unchanged.
func TestLoaderStopsWhenTheStoreIsGone(t *testing.T) {
	base := newEnv(t)
	recs, want := tenPages()
	out := &outageStore{Store: base.st, downAt: "http://p5.example/"}
	e := newEnvOn(t, out, base.ts)
	s, ps, err := e.tryLoad(context.Background(), records(recs...), loader.Options{Concurrency: 1, BatchSize: 1, Unreachable: 300 * time.Millisecond})
	if !errors.Is(err, loader.ErrUnreachable) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("run against a store gone for good: %v", err)
	}
	if s.Loaded != 5 || s.Abandoned < 1 || s.Failed != 0 || s.OK() {
		t.Fatalf("summary %+v", s.Counts)
	}
	checkAccounting(t, s)
	if len(ps) != 0 {
		t.Fatalf("records reported as problems rather than not loaded: %v", ps)
	}

	out.down.Store(false)
	out.downAt = ""
	s, ps = e.load(records(recs...), loader.Options{Concurrency: 1, BatchSize: 1})
	if !s.OK() || s.Loaded != 5 || s.Unchanged != 5 || len(ps) != 0 {
		t.Fatalf("second run: summary %+v, problems %v", s.Counts, ps)
	}
	base.wantPages(want)
}
