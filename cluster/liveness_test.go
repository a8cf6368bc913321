package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// shortTTL keeps expiry tests quick; refreshes then run every ~333ms.
const shortTTL = time.Second

func newLiveness(t *testing.T, js jetstream.JetStream, id string, o LivenessOptions) *Liveness {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	l, err := NewLiveness(testCtx(t), js, id, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// observer checks liveness without caching, and without registering a
// worker that matters to the test.
func observer(t *testing.T, js jetstream.JetStream) *Liveness {
	return newLiveness(t, js, "observer", LivenessOptions{TTL: shortTTL, CacheFor: -1})
}

func alive(t *testing.T, l *Liveness, holder string) bool {
	t.Helper()
	a, err := l.Alive(testCtx(t), holder)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestLivenessAliveAndClose(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	w := newLiveness(t, js, "w1", LivenessOptions{TTL: shortTTL})
	obs := observer(t, js)

	if !alive(t, obs, "w1") || !alive(t, w, "w1") {
		t.Fatal("registered worker reported dead")
	}
	for _, h := range []string{"nobody", "", strings.Repeat("x", 1000), "w1 "} {
		if alive(t, obs, h) {
			t.Fatalf("unknown holder %q reported alive", h)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if alive(t, obs, "w1") {
		t.Fatal("closed worker still alive")
	}
	if alive(t, w, "w1") {
		t.Fatal("closed worker still alive by its own (cached) account")
	}
	if err := w.Refresh(testCtx(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Refresh after Close: %v", err)
	}
}

func TestLivenessRefreshOutlivesTTL(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	newLiveness(t, js, "w1", LivenessOptions{TTL: shortTTL})
	obs := observer(t, js)
	first, err := obs.Workers(testCtx(t))
	if err != nil || len(first) != 2 {
		t.Fatalf("%v %v", first, err)
	}
	time.Sleep(2*shortTTL + shortTTL/2)
	if !alive(t, obs, "w1") {
		t.Fatal("refreshed worker expired")
	}
	ws, err := obs.Workers(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !ws[1].LastRefresh.After(first[1].LastRefresh) || ws[1].ID != "w1" {
		t.Fatalf("token not refreshed: %v then %v", first[1], ws[1])
	}
}

func TestLivenessCrashedWorkerExpires(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	w := newLiveness(t, js, "crashy", LivenessOptions{TTL: shortTTL})
	obs := observer(t, js)
	w.crash()
	if !alive(t, obs, "crashy") {
		t.Fatal("dead right after crash: the token should last its TTL")
	}
	eventually(t, 5*shortTTL, "crashed worker's token expires", func() bool { return !alive(t, obs, "crashy") })
	// Close after a crash deletes nothing and does not fail.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLivenessCache(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	w := newLiveness(t, js, "w1", LivenessOptions{TTL: 2 * time.Second})
	obs := newLiveness(t, js, "obs", LivenessOptions{TTL: 2 * time.Second, CacheFor: 500 * time.Millisecond})
	if !alive(t, obs, "w1") {
		t.Fatal("dead")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Within CacheFor the cached answer may stand; it must not outlive it.
	eventually(t, 3*time.Second, "cached answer lapses", func() bool { return !alive(t, obs, "w1") })
}

func TestLivenessDuplicateID(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	newLiveness(t, js, "dup", LivenessOptions{TTL: shortTTL, Info: "first"})
	_, err := NewLiveness(testCtx(t), js, "dup", LivenessOptions{TTL: shortTTL, Logger: quietLogger()})
	if !errors.Is(err, ErrWorkerIDInUse) || !strings.Contains(err.Error(), "first") {
		t.Fatalf("err = %v", err)
	}
}

func TestLivenessReRegistersAfterExpiry(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	w := newLiveness(t, js, "w1", LivenessOptions{TTL: 5 * time.Second})
	obs := observer(t, js)
	ctx := testCtx(t)
	// Simulate the token lapsing (e.g. refreshes failed for a TTL).
	if err := w.kv.Purge(ctx, w.key); err != nil {
		t.Fatal(err)
	}
	if alive(t, obs, "w1") {
		t.Fatal("purged token alive")
	}
	if err := w.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if !alive(t, obs, "w1") {
		t.Fatal("not re-registered")
	}
	// Another process writing the same ID is not overwritten.
	if _, err := w.kv.Put(ctx, w.key, []byte(`{"id":"w1","info":"impostor","instance":"other"}`)); err != nil {
		t.Fatal(err)
	}
	if err := w.Refresh(ctx); !errors.Is(err, ErrWorkerIDInUse) {
		t.Fatalf("err = %v", err)
	}
}

func TestLivenessCloseAfterUnseenRefresh(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	w := newLiveness(t, js, "w1", LivenessOptions{TTL: 5 * time.Second})
	obs := observer(t, js)
	// A refresh that reached the server but whose acknowledgement Close cut
	// off leaves l.rev behind; Close must still delete the token.
	w.mu.Lock()
	if _, err := w.put(testCtx(t), w.payload(), w.rev); err != nil {
		t.Fatal(err)
	}
	w.mu.Unlock()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(t, obs, "w1") {
		t.Fatal("token survived Close")
	}
}

func TestLivenessWorkers(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	obs := observer(t, js)
	odd := "worker 7/ü.*>" // not a valid KV key as is
	b := newLiveness(t, js, "b", LivenessOptions{TTL: shortTTL, Info: "host=h2 pid=2"})
	newLiveness(t, js, odd, LivenessOptions{TTL: shortTTL, Info: "host=h3 pid=3"})
	newLiveness(t, js, "a", LivenessOptions{TTL: shortTTL, Info: "host=h1 pid=1"})

	ws, err := obs.Workers(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.ID)
		if w.TTL != shortTTL || w.LastRefresh.IsZero() || time.Since(w.LastRefresh) > time.Minute {
			t.Errorf("%+v", w)
		}
	}
	if got := strings.Join(ids, ","); got != "a,b,observer,"+odd {
		t.Fatalf("workers %q", got)
	}
	if ws[0].Info != "host=h1 pid=1" {
		t.Fatalf("info %q", ws[0].Info)
	}
	if !alive(t, obs, odd) {
		t.Fatal("odd ID dead")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ws, err = obs.Workers(testCtx(t))
	if err != nil || len(ws) != 3 {
		t.Fatalf("after Close: %v %v", ws, err)
	}
}

func TestClusterOldestActive(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx := testCtx(t)
	w1 := newLiveness(t, js, "w1", LivenessOptions{TTL: shortTTL})
	w2 := newLiveness(t, js, "w2", LivenessOptions{TTL: shortTTL})
	check := func(wantTs uint64, wantOK bool) {
		t.Helper()
		ts, ok, err := w1.ClusterOldestActive(ctx)
		if err != nil || ts != wantTs || ok != wantOK {
			t.Fatalf("ClusterOldestActive = %d, %v, %v; want %d, %v", ts, ok, err, wantTs, wantOK)
		}
	}
	check(0, false)
	w1.SetOldestActive(200)
	w2.SetOldestActive(100)
	for _, w := range []*Liveness{w1, w2} {
		if err := w.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check(100, true)
	w2.SetOldestActive(0) // no transaction running
	if err := w2.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	check(200, true)
	w2.SetOldestActive(50)
	if err := w2.Close(); err != nil { // a dead worker's value does not count
		t.Fatal(err)
	}
	check(200, true)
	// The refresher publishes SetOldestActive by itself.
	w1.SetOldestActive(300)
	eventually(t, 5*shortTTL, "refresh publishes oldest active", func() bool {
		ts, _, err := w1.ClusterOldestActive(ctx)
		return err == nil && ts == 300
	})
}

func TestLivenessStopsWithContext(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx, cancel := context.WithCancel(context.Background())
	l, err := NewLiveness(ctx, js, "w1", LivenessOptions{TTL: shortTTL, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-l.loopDone:
	case <-time.After(5 * time.Second):
		t.Fatal("refresher outlived its context")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestLivenessOptionsValidate(t *testing.T) {
	t.Parallel()
	var o LivenessOptions
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Bucket != "trickle_workers" || o.TTL != 10*time.Second || o.RefreshInterval != o.TTL/3 || o.CacheFor != time.Second || o.Info == "" {
		t.Fatalf("defaults %+v", o)
	}
	for _, tc := range []struct {
		o     LivenessOptions
		field string
	}{
		{LivenessOptions{TTL: 1500 * time.Millisecond}, "TTL"},
		{LivenessOptions{TTL: 500 * time.Millisecond}, "TTL"},
		{LivenessOptions{TTL: time.Second, RefreshInterval: time.Second}, "RefreshInterval"},
		{LivenessOptions{TTL: time.Second, CacheFor: 2 * time.Second}, "CacheFor"},
		{LivenessOptions{Bucket: "a.b"}, "Bucket"},
		{LivenessOptions{Replicas: 7}, "Replicas"},
	} {
		tc.o.EnsureDefaults()
		if err := tc.o.Validate(); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
}

var _ interface {
	Alive(ctx context.Context, holder string) (bool, error)
} = (*Liveness)(nil)
