package scanner

import (
	"sync"
	"time"
)

// HeldRows is how many busy hinted rows the scanner has noted (see
// hints.held).
func (s *Scanner) HeldRows() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.hints.held)
}

// SteppedClock is a clock for delays that moves only when stepped.
type SteppedClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []steppedTimer
}

type steppedTimer struct {
	at time.Time
	f  func()
}

func (c *SteppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *SteppedClock) AfterFunc(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, steppedTimer{at: c.now.Add(d), f: f})
}

// Step moves the clock on by d and runs the timers that came due.
func (c *SteppedClock) Step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
		} else {
			due = append(due, t.f)
		}
	}
	c.timers = kept
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// UseClock has s time its delays by c.
func (s *Scanner) UseClock(c *SteppedClock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = c
}
