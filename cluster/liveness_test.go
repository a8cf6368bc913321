package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// shortTTL keeps expiry tests quick; refreshes then run every ~333ms.
const shortTTL = time.Second

// steadyTTL is the TTL of workers whose tokens must not lapse during a
// test however slowly a loaded machine runs it: tests take seconds, and
// their refreshers would have to stall for about this long.
const steadyTTL = 30 * time.Second

func newLiveness(t *testing.T, js jetstream.JetStream, id string, o LivenessOptions) *Liveness {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	// The worker lives as long as the test: its context ends after Close,
	// which is registered later and so runs first.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	l, err := NewLiveness(ctx, js, id, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// observer checks liveness without caching, and without registering a
// worker that matters to the test.
func observer(t *testing.T, js jetstream.JetStream) *Liveness {
	return newLiveness(t, js, "observer", LivenessOptions{TTL: steadyTTL, CacheFor: -1})
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
	w := newLiveness(t, js, "w1", LivenessOptions{TTL: steadyTTL})
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

// TestLivenessRefreshOutlivesTTL: a refreshed token never lapses. The
// test follows the token's writes until the server's timestamps show it
// present for over two TTLs; an expiry in between fails it at once. Eight
// refreshes per TTL keep a loaded machine's scheduling out of the way.
func TestLivenessRefreshOutlivesTTL(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	const ttl = 2 * time.Second
	w := newLiveness(t, js, "w1", LivenessOptions{TTL: ttl, RefreshInterval: ttl / 8})
	obs := observer(t, js)
	watch := watchKey(t, w.kv, w.key)
	var first, last jetstream.KeyValueEntry
	for last == nil || last.Created().Sub(first.Created()) <= 2*ttl {
		e := watch.next("the refresher rewriting the token")
		switch {
		case e == nil:
			if first == nil {
				t.Fatal("no token right after NewLiveness")
			}
		case e.Operation() != jetstream.KeyValuePut:
			t.Fatalf("token %v at %v (revision %d) although its worker refreshes it", e.Operation(), e.Created(), e.Revision())
		case first == nil:
			first, last = e, e
		default:
			last = e
		}
	}
	if !alive(t, obs, "w1") {
		t.Fatal("refreshed worker reported dead")
	}
	ws, err := obs.Workers(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ws, func(w WorkerInfo) bool { return w.ID == "w1" })
	if i < 0 || ws[i].LastRefresh.Before(last.Created()) {
		t.Fatalf("workers %+v: want w1 refreshed at %v or later", ws, last.Created())
	}
}

// TestLivenessCrashedWorkerExpires: a crashed worker's token is left in
// place and expires at its TTL, after which the worker is dead.
func TestLivenessCrashedWorkerExpires(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	w := newLiveness(t, js, "crashy", LivenessOptions{TTL: shortTTL})
	obs := observer(t, js)
	watch := watchKey(t, w.kv, w.key)
	w.crash()
	crashed := time.Now().Round(0) // the server stamps writes with this same clock
	var last jetstream.KeyValueEntry
	for {
		e := watch.next("the crashed worker's token expiring")
		if e == nil {
			continue
		}
		if e.Operation() == jetstream.KeyValuePut {
			if e.Created().After(crashed) {
				t.Fatalf("token rewritten at %v, after the crash at %v", e.Created(), crashed)
			}
			last = e
			continue
		}
		// The server's clock stamps both the last write and the marker
		// of the token's removal: an expiry comes at least a TTL later,
		// a deletion at once.
		if last == nil {
			t.Fatalf("token %v before the watch saw it", e.Operation())
		}
		if gap := e.Created().Sub(last.Created()); gap < shortTTL {
			t.Fatalf("token removed %v after its last write, before its TTL (%v): the crash deleted it", gap, shortTTL)
		}
		break
	}
	if alive(t, obs, "crashy") {
		t.Fatal("crashed worker alive after its token expired")
	}
	// Close after a crash deletes nothing and does not fail.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLivenessCache: Alive answers from its cache for CacheFor, and not a
// moment longer; the cache's clock is stepped by the test.
func TestLivenessCache(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	w := newLiveness(t, js, "w1", LivenessOptions{TTL: 2 * time.Second})
	const cacheFor = 500 * time.Millisecond
	obs := newLiveness(t, js, "obs", LivenessOptions{TTL: 2 * time.Second, CacheFor: cacheFor})
	clock := time.Now()
	obs.now = func() time.Time { return clock } // only Alive, on this goroutine, reads it
	if !alive(t, obs, "w1") {
		t.Fatal("dead")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(cacheFor)
	if !alive(t, obs, "w1") {
		t.Fatal("answer not cached for CacheFor: Close showed at once")
	}
	clock = clock.Add(time.Nanosecond)
	if alive(t, obs, "w1") {
		t.Fatal("cached answer outlived CacheFor")
	}
}

func TestLivenessDuplicateID(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	newLiveness(t, js, "dup", LivenessOptions{TTL: steadyTTL, Info: "first"})
	_, err := NewLiveness(testCtx(t), js, "dup", LivenessOptions{TTL: steadyTTL, Logger: quietLogger()})
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

// A process whose NATS server is gone exits at once: Close leaves the
// token to expire rather than waiting for a server that will not answer
// (it used to wait the whole TTL, holding up every command whose runner
// had died).
func TestLivenessCloseWithoutItsServer(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	nc, js := connectJS(t, srv)
	w := newLiveness(t, js, "w1", LivenessOptions{TTL: 4 * hangGuard})
	srv.Shutdown()
	for deadline := time.Now().Add(hangGuard); nc.IsConnected(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the client still says it is connected %v after its server shut down", hangGuard)
		}
	}
	closed := make(chan error, 1)
	go func() { closed <- w.Close() }()
	if err := recv(t, closed, "Close with the NATS server gone"); err != nil {
		t.Fatalf("Close = %v, want nil: the token expires by itself", err)
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
	if _, err := w.put(testCtx(t), w.payload(w.writes+1), w.rev); err != nil {
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
	start := time.Now().Round(0)
	obs := observer(t, js)
	odd := "worker 7/ü.*>" // not a valid KV key as is
	b := newLiveness(t, js, "b", LivenessOptions{TTL: steadyTTL, Info: "host=h2 pid=2"})
	newLiveness(t, js, odd, LivenessOptions{TTL: steadyTTL, Info: "host=h3 pid=3"})
	newLiveness(t, js, "a", LivenessOptions{TTL: steadyTTL, Info: "host=h1 pid=1"})

	ws, err := obs.Workers(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Round(0)
	var ids []string
	for _, w := range ws {
		ids = append(ids, w.ID)
		// The server that stamps the writes runs on this process's clock.
		if w.TTL != steadyTTL || w.LastRefresh.Before(start) || w.LastRefresh.After(end) {
			t.Errorf("%+v: want TTL %v and LastRefresh within the test (%v to %v)", w, steadyTTL, start, end)
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

// oldestFunc is a settable source for LivenessOptions.OldestActive.
type oldestFunc struct{ ts atomic.Uint64 }

func (o *oldestFunc) get() uint64 { return o.ts.Load() }

func TestClusterOldestActive(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx := testCtx(t)
	var o1, o2 oldestFunc
	// w1's refresher runs often: the test waits for two of its writes.
	w1 := newLiveness(t, js, "w1", LivenessOptions{TTL: steadyTTL, RefreshInterval: 200 * time.Millisecond, OldestActive: o1.get})
	w2 := newLiveness(t, js, "w2", LivenessOptions{TTL: steadyTTL, OldestActive: o2.get})
	open := []*Liveness{w1, w2}
	refreshed := func() []WorkerInfo {
		t.Helper()
		since, err := w1.Workers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range open {
			refreshTwice(t, ctx, w)
		}
		return since
	}
	check := func(since []WorkerInfo, wantTs uint64, wantOK bool) {
		t.Helper()
		ts, ok, err := w1.ClusterOldestActive(ctx, since)
		if err != nil || ts != wantTs || ok != wantOK {
			t.Fatalf("ClusterOldestActive = %d, %v, %v; want %d, %v", ts, ok, err, wantTs, wantOK)
		}
	}
	check(refreshed(), 0, false)
	o1.ts.Store(200)
	o2.ts.Store(100)
	check(refreshed(), 100, true)
	o2.ts.Store(0) // no transaction running
	check(refreshed(), 200, true)
	o2.ts.Store(50)
	since := refreshed()
	if err := w2.Close(); err != nil { // a dead worker's value does not count
		t.Fatal(err)
	}
	open = open[:1]
	check(since, 200, true)
	// The refresher publishes what the function returns at each write.
	watch := watchKey(t, w1.kv, w1.key, jetstream.UpdatesOnly())
	o1.ts.Store(300)
	e := watch.next("the refresher rewriting the token")
	var tok token
	if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &tok) != nil {
		t.Fatalf("token %v: %q", e.Operation(), e.Value())
	}
	if tok.OldestActive != 300 {
		t.Fatalf("the refresh after the function changed wrote %+v", tok)
	}
	check(refreshed(), 300, true)
}

// refreshTwice writes w's token twice: what the second write reports was
// computed after the first had landed.
func refreshTwice(t *testing.T, ctx context.Context, w *Liveness) {
	t.Helper()
	for range 2 {
		if err := w.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// The rule ClusterOldestActive trusts a report by: its token's payload was
// computed after the collector's listing.
func TestComputedSince(t *testing.T) {
	at := func(instance string, writes uint64) WorkerInfo {
		return WorkerInfo{ID: "w", Instance: instance, Writes: writes}
	}
	for _, c := range []struct {
		name   string
		before WorkerInfo
		listed bool
		now    WorkerInfo
		want   bool
	}{
		{"not rewritten", at("a", 5), true, at("a", 5), false},
		{"rewritten once: its payload may predate the listing", at("a", 5), true, at("a", 6), false},
		{"rewritten twice", at("a", 5), true, at("a", 7), true},
		{"registered since, first write", WorkerInfo{}, false, at("a", 1), false},
		{"registered since, second write", WorkerInfo{}, false, at("a", 2), true},
		{"another process under the ID, second write", at("a", 9), true, at("b", 2), true},
		{"another process under the ID, first write", at("a", 9), true, at("b", 1), false},
		{"registered again after expiring, counting from 1", at("a", 9), true, at("a", 3), true},
		{"registered again, first write", at("a", 9), true, at("a", 1), false},
	} {
		if got := computedSince(c.before, c.listed, c.now); got != c.want {
			t.Errorf("%s: computedSince(%+v, %v, %+v) = %v, want %v", c.name, c.before, c.listed, c.now, got, c.want)
		}
	}
}

// A token not rewritten twice since the collector's first listing may
// predate transactions its worker began since: the second listing refuses
// it.
func TestClusterOldestActiveRefusesAStaleToken(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx := testCtx(t)
	var o oldestFunc
	o.ts.Store(500)
	obs := newLiveness(t, js, "collector", LivenessOptions{TTL: steadyTTL})
	w := newLiveness(t, js, "stuck", LivenessOptions{TTL: steadyTTL, OldestActive: o.get})
	since, err := obs.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refreshTwice(t, ctx, obs)
	// "stuck" began a transaction at 100 and has not refreshed since.
	o.ts.Store(100)
	stale := func(when string) {
		t.Helper()
		_, _, err := obs.ClusterOldestActive(ctx, since)
		if !errors.Is(err, ErrStaleToken) || !strings.Contains(err.Error(), `"stuck"`) {
			t.Fatalf("ClusterOldestActive %s = %v, want ErrStaleToken naming the worker", when, err)
		}
	}
	stale("with a token not rewritten")
	if err := w.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	stale("with a token rewritten once")
	if err := w.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if ts, ok, err := obs.ClusterOldestActive(ctx, since); err != nil || !ok || ts != 100 {
		t.Fatalf("after two refreshes: %d, %v, %v; want 100", ts, ok, err)
	}
}

// The race a revision cannot see: a refresh computes its payload, a
// transaction begins, the collector draws its timestamp and lists the
// workers, and only then does the write land. The token is new to the
// listing but says nothing of the transaction; the next write does.
func TestClusterOldestActiveRefusesAPayloadOlderThanTheListing(t *testing.T) {
	t.Parallel()
	js := newJS(t)
	ctx := testCtx(t)
	var o oldestFunc
	computed, land := make(chan uint64, 1), make(chan struct{})
	var hold atomic.Bool
	oldest := func() uint64 {
		v := o.get()
		if hold.Load() {
			computed <- v
			<-land
		}
		return v
	}
	obs := newLiveness(t, js, "collector", LivenessOptions{TTL: steadyTTL})
	w := newLiveness(t, js, "slow", LivenessOptions{TTL: steadyTTL, OldestActive: oldest})
	hold.Store(true)
	refreshed := make(chan error, 1)
	go func() { refreshed <- w.Refresh(ctx) }()
	if v := <-computed; v != 0 {
		t.Fatalf("payload computed with %d running, want none", v)
	}
	hold.Store(false)
	o.ts.Store(100) // the transaction begins, then the collector's timestamp
	since, err := obs.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	close(land)
	if err := <-refreshed; err != nil {
		t.Fatal(err)
	}
	refreshTwice(t, ctx, obs)
	if ts, ok, err := obs.ClusterOldestActive(ctx, since); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("ClusterOldestActive after a write whose payload predates the listing = %d, %v, %v; want ErrStaleToken", ts, ok, err)
	}
	if err := w.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if ts, ok, err := obs.ClusterOldestActive(ctx, since); err != nil || !ok || ts != 100 {
		t.Fatalf("after the next write: %d, %v, %v; want 100", ts, ok, err)
	}
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
	recv(t, l.loopDone, "the refresher stopping with its context")
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
