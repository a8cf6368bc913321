package oracle

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newTestClient(t testing.TB, r Reserver, opts *ClientOptions) *Client {
	t.Helper()
	c, err := NewClient(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestClientMonotonicUnique(t *testing.T) {
	mem := NewMemPersister(0)
	s := newTestServer(t, mem, &ServerOptions{Window: time.Millisecond})
	c := newTestClient(t, s, &ClientOptions{MaxBatch: 64})
	const g, iters = 32, 2000
	// Every fourth call bypasses the Client, like a transaction committing
	// through another process: hammer then checks that the Client never
	// hands out a timestamp below one the Server issued before the call.
	var calls, direct atomic.Int64
	_, last := hammer(t, g, iters, 1, func(ctx context.Context, _ int) (uint64, error) {
		if calls.Add(1)%4 == 0 {
			direct.Add(1)
			return s.Reserve(ctx, 1)
		}
		return c.Timestamp(ctx)
	})
	if last > mem.Top() {
		t.Fatalf("served %d above persisted top %d", last, mem.Top())
	}
	st := c.Stats()
	viaClient := uint64(g*iters - direct.Load())
	if st.Timestamps != viaClient || st.Batches == 0 || st.Batches > viaClient || st.Errors != 0 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("%d timestamps in %d batches", st.Timestamps, st.Batches)
}

func TestClientReserveN(t *testing.T) {
	c := newTestClient(t, newTestServer(t, NewMemPersister(0), nil), &ClientOptions{MaxBatch: 8})
	// n up to 11 exceeds the max batch: such requests get a call of their own.
	hammer(t, 16, 500, 11, c.Reserve)
	for _, n := range []int{0, -3, MaxReserve + 1} {
		if _, err := c.Reserve(context.Background(), n); !errors.Is(err, ErrInvalidCount) {
			t.Errorf("Reserve(%d): %v, want ErrInvalidCount", n, err)
		}
	}
}

// gate is a Reserver that announces each call and holds it until released,
// so tests can queue waiters behind an in-flight call deterministically.
type gate struct {
	r       Reserver
	entered chan int   // the n of each call, on entry
	release chan error // the error the held call returns (nil: pass through)

	mu                  sync.Mutex
	inFlight, maxFlight int
	calls               []int
}

func newGate(r Reserver) *gate {
	return &gate{r: r, entered: make(chan int, 16), release: make(chan error)}
}

func (g *gate) Reserve(ctx context.Context, n int) (uint64, error) {
	g.mu.Lock()
	g.inFlight++
	g.maxFlight = max(g.maxFlight, g.inFlight)
	g.calls = append(g.calls, n)
	g.mu.Unlock()
	defer func() { g.mu.Lock(); g.inFlight--; g.mu.Unlock() }()
	g.entered <- n
	if err := <-g.release; err != nil {
		return 0, err
	}
	return g.r.Reserve(ctx, n)
}

// waitPending waits until the client has want timestamps queued behind the
// in-flight call. It fails only if that never happens, not on slowness.
func waitPending(t *testing.T, c *Client, want int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for c.Stats().Pending != want {
		if time.Now().After(deadline) {
			t.Fatalf("pending %d, want %d", c.Stats().Pending, want)
		}
		time.Sleep(time.Millisecond)
	}
}

type reserverFunc func(context.Context, int) (uint64, error)

func (f reserverFunc) Reserve(ctx context.Context, n int) (uint64, error) { return f(ctx, n) }

type result struct {
	ts  uint64
	err error
}

// startWaiters calls Timestamp from k goroutines; results arrive on the
// returned channel.
func startWaiters(c *Client, ctx context.Context, k int) chan result {
	out := make(chan result, k)
	for range k {
		go func() { ts, err := c.Timestamp(ctx); out <- result{ts, err} }()
	}
	return out
}

func TestClientCoalesces(t *testing.T) {
	g := newGate(newTestServer(t, NewMemPersister(0), nil))
	c := newTestClient(t, g, nil)
	ctx := context.Background()

	first := startWaiters(c, ctx, 1)
	if n := <-g.entered; n != 1 {
		t.Fatalf("first call asked for %d", n)
	}
	const k = 10
	rest := startWaiters(c, ctx, k)
	waitPending(t, c, k) // all k queued behind the held call
	g.release <- nil
	r0 := <-first
	if n := <-g.entered; n != k {
		t.Fatalf("second call asked for %d, want %d (one call for all waiters)", n, k)
	}
	g.release <- nil

	var got []uint64
	for range k {
		r := <-rest
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.ts <= r0.ts {
			t.Fatalf("waiter got %d, not above %d from the call in flight when it arrived", r.ts, r0.ts)
		}
		got = append(got, r.ts)
	}
	slices.Sort(got)
	if got[k-1]-got[0] != k-1 || len(slices.Compact(got)) != k {
		t.Fatalf("waiters did not get %d distinct timestamps of one range: %v", k, got)
	}
	if st := c.Stats(); st.Batches != 2 || st.Timestamps != k+1 {
		t.Fatalf("stats %+v, want 2 batches, %d timestamps", st, k+1)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.maxFlight != 1 {
		t.Fatalf("%d Reserve calls in flight at once", g.maxFlight)
	}
}

func TestClientMaxBatch(t *testing.T) {
	g := newGate(newTestServer(t, NewMemPersister(0), nil))
	c := newTestClient(t, g, &ClientOptions{MaxBatch: 3})
	ctx := context.Background()
	first := startWaiters(c, ctx, 1)
	<-g.entered
	rest := startWaiters(c, ctx, 7)
	waitPending(t, c, 7)
	g.release <- nil
	<-first
	for _, want := range []int{3, 3, 1} {
		if n := <-g.entered; n != want {
			t.Fatalf("call asked for %d, want %d", n, want)
		}
		g.release <- nil
	}
	for range 7 {
		if r := <-rest; r.err != nil {
			t.Fatal(r.err)
		}
	}
}

func TestClientCancelledWaiter(t *testing.T) {
	g := newGate(newTestServer(t, NewMemPersister(0), nil))
	c := newTestClient(t, g, nil)
	first := startWaiters(c, context.Background(), 1)
	<-g.entered

	ctx, cancel := context.WithCancel(context.Background())
	doomed := startWaiters(c, ctx, 1)
	const k = 5
	rest := startWaiters(c, context.Background(), k)
	waitPending(t, c, k+1)
	cancel()
	if r := <-doomed; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled waiter got %v, want context.Canceled", r.err)
	}
	waitPending(t, c, k) // it withdrew its request
	g.release <- nil
	if r := <-first; r.err != nil {
		t.Fatal(r.err)
	}
	if n := <-g.entered; n != k {
		t.Fatalf("second call asked for %d, want %d", n, k)
	}
	g.release <- nil
	for range k {
		if r := <-rest; r.err != nil {
			t.Fatal(r.err)
		}
	}
	// A context that is already done never queues.
	if _, err := c.Timestamp(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestClientErrorReachesWholeBatch(t *testing.T) {
	g := newGate(newTestServer(t, NewMemPersister(0), nil))
	c := newTestClient(t, g, nil)
	ctx := context.Background()
	first := startWaiters(c, ctx, 1)
	<-g.entered
	const k = 6
	rest := startWaiters(c, ctx, k)
	waitPending(t, c, k)
	g.release <- nil
	<-first
	<-g.entered
	boom := errors.New("oracle unreachable")
	g.release <- boom
	for range k {
		if r := <-rest; !errors.Is(r.err, boom) {
			t.Fatalf("waiter got %v, want %v", r.err, boom)
		}
	}
	if st := c.Stats(); st.Errors != 1 {
		t.Fatalf("stats %+v, want 1 error", st)
	}
	// The Client recovers with the next call.
	again := startWaiters(c, ctx, 1)
	<-g.entered
	g.release <- nil
	if r := <-again; r.err != nil {
		t.Fatal(r.err)
	}
}

func TestClientClose(t *testing.T) {
	g := newGate(newTestServer(t, NewMemPersister(0), nil))
	c := newTestClient(t, g, nil)
	first := startWaiters(c, context.Background(), 1)
	<-g.entered
	queued := startWaiters(c, context.Background(), 3)
	waitPending(t, c, 3)
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	for { // wait until Close has marked the client closed
		c.mu.Lock()
		done := c.closed
		c.mu.Unlock()
		if done {
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a Reserve call was in flight")
	default:
	}
	g.release <- nil // let the in-flight call finish
	<-closed
	<-first
	for range 3 {
		if r := <-queued; !errors.Is(r.err, ErrClosed) {
			t.Fatalf("queued waiter got %v, want ErrClosed", r.err)
		}
	}
	if _, err := c.Timestamp(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	c.Close() // idempotent
}

func TestClientOptions(t *testing.T) {
	r := reserverFunc(func(context.Context, int) (uint64, error) { return 1, nil })
	for _, n := range []int{-1, MaxReserve + 1} {
		var oe *OptionError
		if _, err := NewClient(r, &ClientOptions{MaxBatch: n}); !errors.As(err, &oe) || oe.Field != "ClientOptions.MaxBatch" {
			t.Errorf("MaxBatch %d: got %v, want *OptionError for ClientOptions.MaxBatch", n, err)
		}
	}
	if err := (&ClientOptions{}).Validate(); err == nil {
		t.Error("Validate accepted MaxBatch 0 without EnsureDefaults")
	}
	if o := new(ClientOptions).EnsureDefaults(); o.MaxBatch != DefaultMaxBatch {
		t.Errorf("default MaxBatch %d, want %d", o.MaxBatch, DefaultMaxBatch)
	}
	if _, err := NewClient(r, nil); err != nil {
		t.Errorf("nil options: %v", err)
	}
	if _, err := NewClient(nil, nil); err == nil {
		t.Error("nil Reserver accepted")
	}
}
