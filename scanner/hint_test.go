package scanner_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/scanner"
)

// blockedFirstRun returns a fixture whose observer's first run closes
// started and waits for release to be closed before it counts; later
// runs count at once.
func blockedFirstRun(t *testing.T) (f *fixture, started, release chan struct{}) {
	started, release = make(chan struct{}), make(chan struct{})
	var runs atomic.Int32
	f = newFixture(t, func(ctx context.Context, tx *framework.Txn, row []byte, c framework.Column) error {
		if runs.Add(1) == 1 {
			close(started)
			<-release
		}
		return countRuns(ctx, tx, row, c)
	})
	return f, started, release
}

// waitHeld waits until looks at hinted rows have found n of them busy.
func waitHeld(t *testing.T, s *scanner.Scanner, n uint64) {
	t.Helper()
	waitUntil(t, func() bool { return s.Stats().Held.Load() >= n }, func() string {
		return fmt.Sprintf("%d looks found a hinted row busy, want %d", s.Stats().Held.Load(), n)
	})
}

// hintingDB makes f's writes hint their rows to s, as a runner's DB does.
func hintingDB(t *testing.T, f *fixture, s *scanner.Scanner) {
	t.Helper()
	db, err := framework.Open(context.Background(), f.st, f.ts, &framework.Options{Observers: f.reg, Logger: quiet, Notified: s.Notified})
	if err != nil {
		t.Fatal(err)
	}
	f.db = db
}

// Rule: a hint for a row whose observer is running here leaves the new
// notification to that run's end, not to a pass: when the run ends, the
// row is looked at again. Here passes come once an hour, so without the
// second look the second change would wait for one.
func TestHintOfARowInFlightIsLookedAtWhenItsRunEnds(t *testing.T) {
	f, started, release := blockedFirstRun(t)
	s := idleScanner(t, f, 2)
	hintingDB(t, f, s)
	passes := s.Stats().Passes.Load()
	f.write(t, 1)
	<-started
	f.write(t, 1) // notified again while the first run goes on
	// The hint's look finds the row busy before the run ends.
	waitHeld(t, s, 1)
	close(release)
	f.waitIdle(t, f.st)
	if got := s.Stats().Ran.Load(); got != 2 {
		t.Fatalf("ran %d observer transactions, want 2", got)
	}
	if p := s.Stats().Passes.Load(); p != passes {
		t.Errorf("%d passes after the scanners paused, want none", p-passes)
	}
}

// Rule: hints do not cut an idle scanner's pause short: the rows they name
// are looked at during the pause, and the pause goes on growing, because a
// pass right behind the hints would only find what they named. Work no
// hint named makes the pause short again. With IdleWait 1ms, ten empty
// passes leave a pause of 1024ms; after 50 hinted rows the next pause is
// MaxIdleWait, 2s (before jitter, from Stats.Paused), where it would be
// 1ms if hints reset it.
func TestHintsDoNotShortenThePause(t *testing.T) {
	f := newFixture(t, countRuns)
	s, err := scanner.New(f.w, &scanner.Options{Tables: f.reg.Tables, Scanners: 1, IdleWait: time.Millisecond, MaxIdleWait: 2 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	startIdle(t, s, 10)
	unhinted := f.db // writes that nobody announces
	hintingDB(t, f, s)
	p0, paused0 := s.Stats().Pauses.Load(), s.Stats().Paused.Load()
	f.write(t, 50)
	f.waitIdle(t, f.st)
	waitPauses(t, s, p0+1)
	if d := time.Duration(s.Stats().Paused.Load() - paused0); d < time.Second {
		t.Fatalf("the pause after hinted work is %v, want it still growing (2s)", d)
	}
	if u := s.Stats().Unhinted.Load(); u != 0 {
		t.Errorf("passes handed out %d notifications of hinted rows as unhinted", u)
	}

	// A change nobody announced, found by the next pass.
	err = unhinted.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("docs", []byte("unannounced"), content, []byte("text"))
	})
	if err != nil {
		t.Fatal(err)
	}
	f.waitIdle(t, f.st)
	if got := s.Stats().Ran.Load(); got != 51 {
		t.Fatalf("ran %d observer transactions, want 51", got)
	}
	if u := s.Stats().Unhinted.Load(); u != 1 {
		t.Errorf("passes handed out %d unhinted notifications, want 1", u)
	}
	// The pause went back to 1ms and grows again: three pauses add up to
	// milliseconds, where each would be 2s without the reset.
	p1, paused1 := s.Stats().Pauses.Load(), s.Stats().Paused.Load()
	waitPauses(t, s, p1+3)
	if d := time.Duration(s.Stats().Paused.Load() - paused1); d >= time.Second {
		t.Errorf("three pauses after a pass that found unhinted work add up to %v: the pause did not go back to IdleWait", d)
	}
}

// Rule: a notification whose observer failed is looked at again when its
// backoff ends, without waiting for a pass (here, once an hour).
func TestFailedNotificationIsLookedAtWhenItsBackoffEnds(t *testing.T) {
	var runs atomic.Int32
	f := newFixture(t, func(ctx context.Context, tx *framework.Txn, row []byte, c framework.Column) error {
		if runs.Add(1) == 1 {
			return errors.New("the first run fails")
		}
		return countRuns(ctx, tx, row, c)
	})
	s, err := scanner.New(f.w, &scanner.Options{Tables: f.reg.Tables, Scanners: 1, IdleWait: time.Hour,
		RetryMin: 10 * time.Millisecond, RetryMax: 10 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	startIdle(t, s, 1)
	hintingDB(t, f, s)
	passes := s.Stats().Passes.Load()
	f.write(t, 1)
	f.waitIdle(t, f.st)
	if got, failed := s.Stats().Ran.Load(), s.Stats().Failed.Load(); got != 1 || failed != 1 {
		t.Fatalf("%d runs committed and %d failed, want 1 and 1", got, failed)
	}
	if p := s.Stats().Passes.Load(); p != passes {
		t.Errorf("%d passes after the scanner paused, want none", p-passes)
	}
}

// Rule: a hinted row whose lock another holder has (another process's
// scanner, which this one is not told about when it lets go) is left to
// that holder or a pass, and a complete pass drops the scanner's note of
// it: the notes stay bounded by what passes have not yet covered.
func TestHintOfARowHeldElsewhereIsLeftToAPass(t *testing.T) {
	f := newFixture(t, countRuns)
	var busy atomic.Bool
	busy.Store(true)
	locks := lockedRows{busy: func([]byte) bool { return busy.Load() }}
	s, err := scanner.New(f.w, &scanner.Options{Tables: f.reg.Tables, Scanners: 1, IdleWait: time.Hour, Locks: locks, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	startIdle(t, s, 1)
	hintingDB(t, f, s)
	f.write(t, 1)
	waitHeld(t, s, 1) // the hint's look found the row locked elsewhere
	if n := s.HeldRows(); n != 1 {
		t.Fatalf("%d rows noted as held, want 1", n)
	}
	// The other holder runs the observer and lets go, without telling.
	n := notify.Notification{Table: "docs", Row: []byte("doc0000"), Column: content}
	if _, err := f.w.Process(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	busy.Store(false)
	pauses := s.Stats().Pauses.Load()
	s.Wake()
	waitPauses(t, s, pauses+1) // after the pass the Wake set off
	if n := s.HeldRows(); n != 0 {
		t.Errorf("%d rows still noted as held after a complete pass", n)
	}
	if r := s.Stats().Ran.Load(); r != 0 {
		t.Errorf("the scanner ran %d observers of a row another holder ran", r)
	}
}

// Rule: a hinted row that a look found busy is looked at again, when this
// scanner's pool releases it, for every column the busy looks were given:
// a later hint of another column of the row, whose look also finds the
// row busy, does not replace the earlier. Here the run of doc:content
// holds the row while both columns are notified again (passes every
// hour); when it ends, both run.
func TestBusyHintsOfTwoColumnsAreBothLookedAtOnRelease(t *testing.T) {
	f, started, release := blockedFirstRun(t)
	s := idleScanner(t, f, 1)
	hintingDB(t, f, s)
	set := func(c framework.Column) {
		t.Helper()
		if err := f.db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
			return tx.Set("docs", []byte("doc"), c, []byte("text"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	set(content)
	<-started
	set(content) // in flight: the look finds it busy
	waitHeld(t, s, 1)
	set(title) // the row is locked by the run: busy again
	waitHeld(t, s, 2)
	close(release)
	f.waitIdle(t, f.st)
	if got := s.Stats().Ran.Load(); got != 3 {
		t.Fatalf("ran %d observer transactions, want 3 (content twice, title once)", got)
	}
}

// Rule: a hint that names a column whose notification is gone (run by a
// pass, or by another process, in the meantime) runs nothing: the run's
// own read of its notification finds none.
func TestHintOfASettledNotificationRunsNothing(t *testing.T) {
	f := newFixture(t, countRuns)
	s := idleScanner(t, f, 1)
	f.write(t, 1)
	n := notify.Notification{Table: "docs", Row: []byte("doc0000"), Column: content}
	if _, err := f.w.Process(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	runs := f.w.Stats().Runs.Load()
	s.Hint(scanner.Row{Table: "docs", Row: []byte("doc0000"), Columns: []framework.Column{content}})
	waitUntil(t, func() bool { return s.Stats().Skipped.Load() > 0 }, func() string { return "the hint was never acted on" })
	if n, found := s.Stats().Named.Load(), s.Stats().Found.Load(); n != 1 || found != 0 {
		t.Errorf("%d notifications run as named and %d found by a look, want 1 and none", n, found)
	}
	if r := f.w.Stats().Runs.Load(); r != runs {
		t.Errorf("%d observer runs for a settled notification, want none", r-runs)
	}
}
