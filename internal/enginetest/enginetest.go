// Package enginetest holds what the engines' tests and the observer
// runtime's share to put processes in a given state: the oracle's clock,
// moved by hand, and a liveness service whose verdicts a test sets. No
// production code imports it.
package enginetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/oracle"
)

// Clock is the oracle's physical clock in tests (oracle.ServerOptions.
// Clock: Now), moved by hand so that lock TTLs expire when a test says.
// The zero value reads the Unix epoch.
type Clock struct{ ms atomic.Int64 }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { return time.UnixMilli(c.ms.Load()) }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// Set sets the clock to t (tests that follow the wall clock).
func (c *Clock) Set(t time.Time) { c.ms.Store(t.UnixMilli()) }

// Liveness is a liveness service whose verdicts tests set: every holder
// is alive until Kill, or until OnlyAlive names another. The zero value
// is ready to use.
type Liveness struct {
	mu        sync.Mutex
	dead      map[string]bool
	onlyAlive string
}

// Alive reports the verdict on holder.
func (l *Liveness) Alive(_ context.Context, holder string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.onlyAlive != "" {
		return holder == l.onlyAlive, nil
	}
	return !l.dead[holder], nil
}

// Kill makes holder dead from now on.
func (l *Liveness) Kill(holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead == nil {
		l.dead = make(map[string]bool)
	}
	l.dead[holder] = true
}

// OnlyAlive makes holder the one alive: everyone else is dead, as after a
// restart of every process.
func (l *Liveness) OnlyAlive(holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onlyAlive = holder
}

// FollowWallClock makes the clock track the wall clock until the test
// ends, for tests whose TTLs run on real time.
func (c *Clock) FollowWallClock(t testing.TB) {
	c.Set(time.Now())
	tick := time.NewTicker(2 * time.Millisecond)
	done := make(chan struct{})
	t.Cleanup(func() { tick.Stop(); close(done) })
	go func() {
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				c.Set(time.Now())
			}
		}
	}()
}

// FormatTs renders a hybrid timestamp compactly for test output: the
// logical counter alone while the clock is at zero, else ms.logical.
func FormatTs(ts uint64) string {
	ms, logical := oracle.PhysicalMillis(ts), ts&(1<<oracle.LogicalBits-1)
	if ms == 0 {
		return fmt.Sprint(logical)
	}
	return fmt.Sprintf("%d.%d", ms, logical)
}

// Lease is an engine lease whose state a test sets: held or lapsed, and
// its term (a lease lost and taken again has a new one).
type Lease struct {
	mu   sync.Mutex
	term uint64
	held bool
}

// NewLease returns a lease held in term 1.
func NewLease() *Lease { return &Lease{term: 1, held: true} }

// Held returns the lease's term and whether it holds.
func (l *Lease) Held() (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term, l.held
}

// Set sets the lease's term and whether it holds.
func (l *Lease) Set(term uint64, held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.term, l.held = term, held
}
