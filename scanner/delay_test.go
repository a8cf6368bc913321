package scanner_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/scanner"
)

// Rule: a notification whose observer has a delay is held back for that
// long after the scanner first found it, and the changes that arrive
// meanwhile are dealt with by the one run that follows. Here a row is
// written three times, each hint looked at, with the delay's clock
// stopped: nothing runs; once the clock passes the delay, one run does.
func TestChangesWithinAnObserversDelayCollapseIntoOneRun(t *testing.T) {
	f := newFixture(t, countRuns)
	s, err := scanner.New(f.w, &scanner.Options{
		Tables: f.reg.Tables, Scanners: 2, IdleWait: time.Hour, Logger: quiet,
		Delay: func(notify.Notification) time.Duration { return time.Second },
	})
	if err != nil {
		t.Fatal(err)
	}
	clock := &scanner.SteppedClock{}
	s.UseClock(clock)
	startIdle(t, s, 2)
	hintingDB(t, f, s)
	for i := range 3 {
		f.write(t, 1)
		waitUntil(t, func() bool { return s.Stats().Hinted.Load() >= uint64(i+1) }, func() string {
			return fmt.Sprintf("%d hinted rows looked at, want %d", s.Stats().Hinted.Load(), i+1)
		})
	}
	if got := s.Stats().Ran.Load(); got != 0 {
		t.Fatalf("%d runs within the delay, want none", got)
	}
	clock.Step(time.Second)
	f.waitIdle(t, f.st)
	if got := s.Stats().Ran.Load(); got != 1 {
		t.Fatalf("%d runs for three changes within the delay, want 1", got)
	}
}

// Rule: without a delay, each of the same three changes runs as its hint
// is looked at: the collapsing above is the delay's doing.
func TestChangesWithoutADelayRunAsTheyCome(t *testing.T) {
	f := newFixture(t, countRuns)
	s := idleScanner(t, f, 2)
	hintingDB(t, f, s)
	for i := range 3 {
		f.write(t, 1)
		waitUntil(t, func() bool { return s.Stats().Ran.Load() >= uint64(i+1) }, func() string {
			return fmt.Sprintf("%d runs, want %d", s.Stats().Ran.Load(), i+1)
		})
	}
}
