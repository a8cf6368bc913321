package oracle

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func newHoldServer(t *testing.T) *Server {
	t.Helper()
	s, err := NewServer(NewMemPersister(0), &ServerOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Rule: no timestamp above a held one is served before its release, so a
// snapshot above a one-phase commit cannot be read before the commit is
// visible.
func TestTimestampAboveHoldWaitsForRelease(t *testing.T) {
	s := newHoldServer(t)
	held, release, err := s.Hold(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan uint64, 1)
	go func() {
		ts, err := s.Timestamp(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- ts
	}()
	select {
	case ts := <-got:
		t.Fatalf("served %d while %d was held", ts, held)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	release() // harmless
	if ts := <-got; ts <= held {
		t.Fatalf("served %d after releasing %d", ts, held)
	}
	if n := s.Held(); n != 0 {
		t.Fatalf("Held() = %d after release", n)
	}
}

// A hold never waits for another: commit timestamps keep coming while
// earlier commits are being written.
func TestHoldDoesNotWaitForOtherHolds(t *testing.T) {
	s := newHoldServer(t)
	a, releaseA, err := s.Hold(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer releaseA()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, releaseB, err := s.Hold(ctx)
	if err != nil {
		t.Fatal(err)
	}
	releaseB()
	if b <= a {
		t.Fatalf("second hold %d not above first %d", b, a)
	}
	if n := s.Held(); n != 1 {
		t.Fatalf("Held() = %d, want 1", n)
	}
}

// A request that cannot wait any longer fails, naming the hold.
func TestWaitForHoldEndsWithContext(t *testing.T) {
	s := newHoldServer(t)
	held, release, err := s.Hold(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = s.Reserve(ctx, 3)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), strconv.FormatUint(held, 10)) {
		t.Fatalf("Reserve while held: %v", err)
	}
}

// Property: whatever the interleaving, every timestamp served is above
// only holds already released. Holders mark their timestamp visible just
// before releasing; readers check every hold below what they got.
func TestServedTimestampsSeeEveryHoldBelow(t *testing.T) {
	s := newHoldServer(t)
	var mu sync.Mutex
	state := map[uint64]bool{} // hold -> visible
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				ts, release, err := s.Hold(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				state[ts] = false
				mu.Unlock()
				time.Sleep(time.Duration(ts%3) * 10 * time.Microsecond)
				mu.Lock()
				state[ts] = true
				mu.Unlock()
				release()
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for i := 0; i < 2000 && !t.Failed(); i++ {
				ts, err := s.Timestamp(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for h, visible := range state {
					if h < ts && !visible {
						t.Errorf("served %d while %d was not visible", ts, h)
					}
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if len(state) == 0 {
		t.Fatal("no hold was taken")
	}
}

// A Client holds through its Server, uncoalesced, and says so when its
// Reserver cannot hold.
func TestClientHold(t *testing.T) {
	s := newHoldServer(t)
	c, err := NewClient(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, release, err := c.Hold(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Held() != 1 {
		t.Fatalf("Server.Held() = %d after Client.Hold", s.Held())
	}
	release()
	if ts, err := c.Timestamp(context.Background()); err != nil || ts <= held {
		t.Fatalf("Timestamp after release = %d, %v (held %d)", ts, err, held)
	}

	remoteLike, err := NewClient(reserverFunc(s.Reserve), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer remoteLike.Close()
	if _, _, err := remoteLike.Hold(context.Background()); !errors.Is(err, ErrHoldUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Hold through a plain Reserver: %v", err)
	}
}
