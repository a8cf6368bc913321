package oracle

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var quiet = slog.New(slog.DiscardHandler)

// fakeClock is a settable clock in milliseconds.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock(ms int64) *fakeClock { c := &fakeClock{}; c.ms.Store(ms); return c }
func (c *fakeClock) now() time.Time    { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) set(ms int64)      { c.ms.Store(ms) }

// crashPersister wraps a MemPersister; crash() makes the dropped Server's
// later Saves (e.g. a background prefetch still running) fail, as they would
// if its process had died.
type crashPersister struct {
	*MemPersister
	mu   sync.Mutex
	dead bool
}

func (c *crashPersister) Save(top uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return errors.New("process is dead")
	}
	return c.MemPersister.Save(top)
}

func (c *crashPersister) crash() { c.mu.Lock(); c.dead = true; c.mu.Unlock() }

const t0 = int64(1_700_000_000_000) // a sane wall clock, in ms

// newTestServer starts a Server on p with opts (nil: defaults), logging
// nothing.
func newTestServer(t testing.TB, p Persister, opts *ServerOptions) *Server {
	t.Helper()
	var o ServerOptions
	if opts != nil {
		o = *opts
	}
	o.Logger = quiet
	s, err := NewServer(p, &o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hammer calls reserve from g goroutines, iters times each, with n cycling
// through 1..maxN. It checks that each call returns a timestamp above
// everything returned before the call began (in real time, across
// goroutines) and that no two ranges overlap. It returns the smallest and
// the largest timestamp served.
func hammer(t *testing.T, g, iters, maxN int, reserve func(context.Context, int) (uint64, error)) (lo, hi uint64) {
	t.Helper()
	var (
		maxSeen atomic.Uint64 // largest last timestamp returned so far
		mu      sync.Mutex
		ranges  [][2]uint64
		wg      sync.WaitGroup
		failed  atomic.Bool
	)
	for w := range g {
		wg.Go(func() {
			local := make([][2]uint64, 0, iters)
			for i := range iters {
				n := 1 + (w+i)%maxN
				before := maxSeen.Load()
				first, err := reserve(context.Background(), n)
				if err != nil {
					t.Error(err)
					failed.Store(true)
					return
				}
				if first <= before {
					t.Errorf("got %d, not above %d returned before the call", first, before)
					failed.Store(true)
					return
				}
				last := first + uint64(n) - 1
				for {
					m := maxSeen.Load()
					if last <= m || maxSeen.CompareAndSwap(m, last) {
						break
					}
				}
				local = append(local, [2]uint64{first, last})
			}
			mu.Lock()
			ranges = append(ranges, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if failed.Load() {
		t.FailNow()
	}
	slices.SortFunc(ranges, func(a, b [2]uint64) int { return cmp.Compare(a[0], b[0]) })
	for i := 1; i < len(ranges); i++ {
		if ranges[i][0] <= ranges[i-1][1] {
			t.Fatalf("ranges overlap: %v and %v", ranges[i-1], ranges[i])
		}
	}
	if len(ranges) != g*iters {
		t.Fatalf("got %d ranges, want %d", len(ranges), g*iters)
	}
	return ranges[0][0], ranges[len(ranges)-1][1]
}

func TestServerMonotonicUnique(t *testing.T) {
	mem := NewMemPersister(0)
	s := newTestServer(t, mem, &ServerOptions{Window: time.Millisecond}) // many Saves
	_, last := hammer(t, 16, 3000, 7, s.Reserve)
	if top := mem.Top(); last > top {
		t.Fatalf("served %d above persisted top %d", last, top)
	}
}

func TestServerTracksClock(t *testing.T) {
	clk := newFakeClock(t0)
	s := newTestServer(t, NewMemPersister(0), &ServerOptions{Clock: clk.now})
	ctx := context.Background()
	for i, want := range []uint64{Compose(t0, 0), Compose(t0, 1), Compose(t0, 2)} {
		if got, _ := s.Reserve(ctx, 1); got != want {
			t.Fatalf("call %d: got %d, want %d", i, got, want)
		}
	}
	clk.set(t0 + 100)
	if got, _ := s.Reserve(ctx, 1); got != Compose(t0+100, 0) {
		t.Fatalf("after clock advance: got %d (physical %d), want %d", got, PhysicalMillis(got), Compose(t0+100, 0))
	}
}

func TestServerLogicalOverflowCarries(t *testing.T) {
	clk := newFakeClock(t0)
	s := newTestServer(t, NewMemPersister(0), &ServerOptions{Clock: clk.now})
	var prev uint64
	for range 5 { // 5 * 2^16 > 2^18 timestamps in one frozen millisecond
		first, err := s.Reserve(context.Background(), MaxReserve)
		if err != nil {
			t.Fatal(err)
		}
		if first <= prev {
			t.Fatalf("%d not above %d", first, prev)
		}
		prev = first + MaxReserve - 1
	}
	if PhysicalMillis(prev) != t0+1 {
		t.Fatalf("physical part %d, want carry into %d", PhysicalMillis(prev), t0+1)
	}
}

func TestServerRestart(t *testing.T) {
	mem := NewMemPersister(0)
	s1 := newTestServer(t, mem, nil)
	_, last := hammer(t, 4, 500, 3, s1.Reserve)
	s1.Close()
	if _, err := s1.Reserve(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reserve after Close: %v, want ErrClosed", err)
	}
	s2 := newTestServer(t, mem, nil)
	if first, err := s2.Reserve(context.Background(), 1); err != nil || first <= last {
		t.Fatalf("after restart got %d, %v; want > %d", first, err, last)
	}
}

func TestServerCrashAfterPersist(t *testing.T) {
	mem := NewMemPersister(0)
	cp := &crashPersister{MemPersister: mem}
	s1 := newTestServer(t, cp, &ServerOptions{Window: time.Millisecond})
	_, last := hammer(t, 8, 1000, 5, s1.Reserve)
	cp.crash() // drop s1 without Close
	s2 := newTestServer(t, mem, nil)
	if lo, _ := hammer(t, 4, 200, 3, s2.Reserve); lo <= last {
		t.Fatalf("after crash served %d, want all > %d", lo, last)
	}
}

func TestServerCrashFirstAfterRestart(t *testing.T) {
	mem := NewMemPersister(0)
	cp := &crashPersister{MemPersister: mem}
	clk := newFakeClock(t0)
	s1 := newTestServer(t, cp, &ServerOptions{Clock: clk.now})
	_, last := hammer(t, 4, 500, 5, s1.Reserve)
	cp.crash()
	s2 := newTestServer(t, mem, &ServerOptions{Clock: clk.now}) // same clock: now is below last
	if first, err := s2.Reserve(context.Background(), 1); err != nil || first <= last {
		t.Fatalf("got %d, %v; want > %d", first, err, last)
	}
}

func TestServerSaveFailure(t *testing.T) {
	clk := newFakeClock(t0)
	mem := NewMemPersister(0)
	s := newTestServer(t, mem, &ServerOptions{Clock: clk.now, Window: time.Millisecond})
	ctx := context.Background()
	if _, err := s.Reserve(ctx, 1); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk on fire")
	mem.FailSaves(boom)
	limit := mem.Top()
	var err error
	for i := 0; err == nil; i++ {
		var first uint64
		first, err = s.Reserve(ctx, MaxReserve)
		if err == nil && first+MaxReserve-1 > limit {
			t.Fatalf("served up to %d above persisted top %d", first+MaxReserve-1, limit)
		}
		if i > 100 {
			t.Fatal("Reserve never failed although Save does")
		}
	}
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want wrapped %v", err, boom)
	}
	if mem.Top() != limit {
		t.Fatalf("persisted top changed to %d", mem.Top())
	}
	// Once storage recovers, the oracle does too.
	mem.FailSaves(nil)
	if first, err := s.Reserve(ctx, 1); err != nil || first <= limit {
		t.Fatalf("after recovery got %d, %v; want > %d", first, err, limit)
	}
}

func TestServerClockBackwards(t *testing.T) {
	clk := newFakeClock(t0)
	s := newTestServer(t, NewMemPersister(0), &ServerOptions{Clock: clk.now})
	ctx := context.Background()
	var prev uint64
	for i, ms := range []int64{t0, t0 + 50, t0 - 10_000, t0 - 10_000, t0 + 20, t0 + 60, 0, -5, t0 + 1000} {
		clk.set(ms)
		for range 3 {
			ts, err := s.Reserve(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if ts <= prev {
				t.Fatalf("step %d (clock %d): %d not above %d", i, ms, ts, prev)
			}
			prev = ts
		}
	}
	if PhysicalMillis(prev) != t0+1000 {
		t.Fatalf("did not follow clock forward again: physical %d", PhysicalMillis(prev))
	}
}

func TestServerClockFarAheadThenRestart(t *testing.T) {
	clk := newFakeClock(t0 + time.Hour.Milliseconds())
	mem := NewMemPersister(0)
	cp := &crashPersister{MemPersister: mem}
	s1 := newTestServer(t, cp, &ServerOptions{Clock: clk.now})
	_, last := hammer(t, 4, 200, 3, s1.Reserve)
	cp.crash()
	clk.set(t0) // clock repaired while the oracle was down
	s2 := newTestServer(t, mem, &ServerOptions{Clock: clk.now})
	first, err := s2.Reserve(context.Background(), 1)
	if err != nil || first <= last {
		t.Fatalf("got %d, %v; want > %d", first, err, last)
	}
}

func TestServerExhausted(t *testing.T) {
	s := newTestServer(t, NewMemPersister(MaxTimestamp-10), nil)
	ctx := context.Background()
	if first, err := s.Reserve(ctx, 5); err != nil || first != MaxTimestamp-9 {
		t.Fatalf("got %d, %v; want %d", first, err, MaxTimestamp-9)
	}
	if _, err := s.Reserve(ctx, 10); !errors.Is(err, ErrExhausted) {
		t.Fatalf("got %v, want ErrExhausted", err)
	}
	if first, err := s.Reserve(ctx, 5); err != nil || first != MaxTimestamp-4 {
		t.Fatalf("got %d, %v; want %d", first, err, MaxTimestamp-4)
	}
	if _, err := s.Reserve(ctx, 1); !errors.Is(err, ErrExhausted) {
		t.Fatalf("got %v, want ErrExhausted", err)
	}
	if _, err := newTestServer(t, NewMemPersister(MaxTimestamp), nil).Reserve(ctx, 1); !errors.Is(err, ErrExhausted) {
		t.Fatalf("restart at MaxTimestamp: got %v, want ErrExhausted", err)
	}
}

func TestServerInvalidArguments(t *testing.T) {
	s := newTestServer(t, NewMemPersister(0), nil)
	for _, n := range []int{0, -1, MaxReserve + 1} {
		if _, err := s.Reserve(context.Background(), n); !errors.Is(err, ErrInvalidCount) {
			t.Errorf("Reserve(%d): %v, want ErrInvalidCount", n, err)
		}
	}
	for _, tc := range []struct {
		field string
		opts  ServerOptions
	}{
		{"ServerOptions.Window", ServerOptions{Window: -time.Millisecond}},
		{"ServerOptions.Window", ServerOptions{Window: time.Microsecond}},
		{"ServerOptions.Window", ServerOptions{Window: 2 * MaxWindow}},
	} {
		var oe *OptionError
		if _, err := NewServer(NewMemPersister(0), &tc.opts); !errors.As(err, &oe) || oe.Field != tc.field ||
			!strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: got %v, want *OptionError for %s", tc.opts, err, tc.field)
		}
	}
	// Validate without EnsureDefaults names the unset fields.
	for field, o := range map[string]*ServerOptions{
		"ServerOptions.Clock":  {Window: time.Second, Logger: quiet},
		"ServerOptions.Logger": {Window: time.Second, Clock: time.Now},
	} {
		var oe *OptionError
		if err := o.Validate(); !errors.As(err, &oe) || oe.Field != field {
			t.Errorf("Validate: got %v, want *OptionError for %s", err, field)
		}
	}
	if err := new(ServerOptions).EnsureDefaults().Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	if _, err := NewServer(nil, nil); err == nil {
		t.Error("nil persister accepted")
	}
}

type loadErrPersister struct{ MemPersister }

func (*loadErrPersister) Load() (uint64, error) { return 0, errors.New("unreadable") }

func TestServerLoadError(t *testing.T) {
	if _, err := NewServer(&loadErrPersister{}, &ServerOptions{Logger: quiet}); err == nil {
		t.Fatal("NewServer ignored a Load error")
	}
}

// blockingPersister blocks every Save until released.
type blockingPersister struct {
	MemPersister
	entered chan uint64
	release chan struct{}
}

func (b *blockingPersister) Save(top uint64) error {
	b.entered <- top
	<-b.release
	return b.MemPersister.Save(top)
}

func TestServerWaitForSaveHonoursContext(t *testing.T) {
	bp := &blockingPersister{entered: make(chan uint64, 1), release: make(chan struct{})}
	s := newTestServer(t, bp, nil)
	done := make(chan error)
	go func() { _, err := s.Reserve(context.Background(), 1); done <- err }()
	<-bp.entered // first Reserve holds the persistence slot
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Reserve(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	close(bp.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
