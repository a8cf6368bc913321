package scanner_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/scanner"
	"github.com/trickle-dev/trickle/store"
)

var (
	content = framework.Column{Family: "doc", Qualifier: "content"}
	// title is observed by the same observer as content, so that a row
	// can have notifications in two columns.
	title = framework.Column{Family: "doc", Qualifier: "title"}
	count = framework.Column{Family: "doc", Qualifier: "runs"}
	quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
)

type fixture struct {
	st  store.Store
	ts  *oracle.Server
	db  *framework.DB
	reg *framework.Registry
	w   *notify.Processor
}

func newFixture(t *testing.T, fn framework.ObserverFunc) *fixture {
	t.Helper()
	st, err := store.Open("", framework.StoreOptions(&store.Options{FS: vfs.NewMem(), Logger: quiet}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newFixtureOn(t, st, fn)
}

// newFixtureOn is newFixture on st, which the caller closes.
func newFixtureOn(t *testing.T, st store.Store, fn framework.ObserverFunc) *fixture {
	t.Helper()
	ts, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	reg := framework.NewRegistry()
	if err := reg.Register(framework.Observer{Name: "count", Table: "docs", Columns: []framework.Column{content, title}, Kind: framework.Strong, Fn: fn}); err != nil {
		t.Fatal(err)
	}
	db, err := framework.Open(context.Background(), st, ts, &framework.Options{Observers: reg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{st: st, ts: ts, db: db, reg: reg, w: notify.NewProcessor(db, reg)}
}

// countRuns increments doc:runs of the row: a committed run count.
func countRuns(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	n := 0
	if v, err := tx.Get(ctx, "docs", row, count); err == nil {
		n, _ = strconv.Atoi(string(v))
	} else if !errors.Is(err, framework.ErrNotFound) {
		return err
	}
	return tx.Set("docs", row, count, []byte(strconv.Itoa(n+1)))
}

func (f *fixture) write(t *testing.T, rows int) {
	t.Helper()
	for lo := 0; lo < rows; lo += 50 {
		err := f.db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
			for i := lo; i < min(lo+50, rows); i++ {
				if err := tx.Set("docs", []byte(fmt.Sprintf("doc%04d", i)), content, []byte("text")); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// waitIdle polls until no notification is pending.
func (f *fixture) waitIdle(t *testing.T, st store.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.AwaitNoPending(ctx, st, []string{"docs"}, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

func TestScannerProcessesEveryNotificationOnce(t *testing.T) {
	testEveryNotificationOnce(t, newFixture(t, countRuns), 300)
}

func testEveryNotificationOnce(t *testing.T, f *fixture, rows int) {
	f.write(t, rows)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := scanner.New(f.w, &scanner.Options{Tables: f.reg.Tables, Scanners: 3, Concurrency: 8, IdleWait: 5 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	f.waitIdle(t, f.st)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	err = f.db.View(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		for i := range rows {
			v, err := tx.Get(ctx, "docs", []byte(fmt.Sprintf("doc%04d", i)), count)
			if err != nil || string(v) != "1" {
				return fmt.Errorf("doc%04d: runs=%s err=%v, want exactly 1", i, v, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := s.Stats().Ran.Load(); r != uint64(rows) {
		t.Errorf("scanner reports %d runs, want %d", r, rows)
	}
}

// countingStore records which locality groups a scanner reads.
type countingStore struct {
	store.Store
	mu     sync.Mutex
	groups map[string]int
	reads  int
}

func (c *countingStore) Scan(ctx context.Context, req store.ScanRequest) iter.Seq2[store.Cell, error] {
	c.mu.Lock()
	g := req.Group
	if g == "" {
		g = store.DefaultGroup
	}
	c.groups[g]++
	c.mu.Unlock()
	return c.Store.Scan(ctx, req)
}

func (c *countingStore) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	c.mu.Lock()
	if table != protocol.MetaTable { // the record of which engine wrote the store, not data
		c.reads++
	}
	c.mu.Unlock()
	return c.Store.ReadRow(ctx, table, row, cols, spans)
}

// recorder is a Processor that only records what it is given.
type recorder struct {
	st   store.Store // where it finds notifications
	mu   sync.Mutex
	seen map[string]int
	fail func(notify.Notification) error
}

func (r *recorder) Find(ctx context.Context, table string, start, end []byte) iter.Seq2[notify.Notification, error] {
	return notify.Find(ctx, r.st, table, start, end)
}

func (r *recorder) Process(_ context.Context, n notify.Notification) (notify.Outcome, error) {
	r.mu.Lock()
	r.seen[string(n.Row)]++
	r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(n); err != nil {
			return notify.OutcomeNone, err
		}
	}
	return notify.OutcomeSkipped, nil
}

func (r *recorder) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// TestScannerReadsOnlyTheNotifyGroup proves, with a store wrapper, that
// finding dirty cells never reads the default locality group. (The store's
// own tests prove a notify-group scan visits no default-group key.)
func TestScannerReadsOnlyTheNotifyGroup(t *testing.T) {
	f := newFixture(t, countRuns)
	f.write(t, 100)
	cs := &countingStore{Store: f.st, groups: map[string]int{}}
	rec := &recorder{st: cs, seen: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := scanner.New(rec, &scanner.Options{Tables: f.reg.Tables, Scanners: 2, IdleWait: time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	waitUntil(t, func() bool { return rec.distinct() >= 100 }, func() string {
		return fmt.Sprintf("the scanner found %d of 100 notifications", rec.distinct())
	})
	cancel()
	<-done
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.groups[protocol.NotifyGroup] == 0 || len(cs.groups) != 1 || cs.reads != 0 {
		t.Fatalf("scanner read groups %v and %d rows; want only the notify group", cs.groups, cs.reads)
	}
}

type failureLog struct {
	mu       sync.Mutex
	attempts map[string]int
	cleared  int
}

func (l *failureLog) RecordFailure(_ context.Context, f notify.Failure) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts[string(f.Row)] = f.Attempts
	return nil
}

func (l *failureLog) ClearFailure(context.Context, notify.Notification) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cleared++
	return nil
}

// TestFailingObserverDoesNotStallOthers: one notification keeps failing; it
// is retried with growing backoff and recorded, while every other one is
// processed.
func TestFailingObserverDoesNotStallOthers(t *testing.T) {
	testFailingObserver(t, newFixture(t, failOnDoc7))
}

// failOnDoc7 counts runs, except on doc0007, where it always fails.
func failOnDoc7(ctx context.Context, tx *framework.Txn, row []byte, c framework.Column) error {
	if string(row) == "doc0007" {
		return errors.New("cannot parse doc0007")
	}
	return countRuns(ctx, tx, row, c)
}

func testFailingObserver(t *testing.T, f *fixture) {
	f.write(t, 50)
	log := &failureLog{attempts: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := scanner.New(f.w, &scanner.Options{Tables: f.reg.Tables, Scanners: 2, Concurrency: 4,
		IdleWait: time.Millisecond, RetryMin: 5 * time.Millisecond, RetryMax: 40 * time.Millisecond, Failures: log, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := admin.Pending(ctx, f.st, []string{"docs"})
		if err != nil {
			t.Fatal(err)
		}
		log.mu.Lock()
		attempts := log.attempts["doc0007"]
		log.mu.Unlock()
		if n == 1 && attempts >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending %d, attempts %d", n, attempts)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if r := s.Stats().Ran.Load(); r != 49 {
		t.Fatalf("%d observer runs committed, want 49", r)
	}
}

// lockedRows pretends another scanner holds some rows.
type lockedRows struct{ busy func(row []byte) bool }

func (l lockedRows) TryLock(_ context.Context, _ string, row []byte) (func(), bool, error) {
	if l.busy(row) {
		return nil, false, nil
	}
	return func() {}, true, nil
}

// TestAntiClumping: a scanner that meets a row another scanner holds jumps
// elsewhere instead of trailing it, and still reaches the free rows.
func TestAntiClumping(t *testing.T) {
	f := newFixture(t, countRuns)
	f.write(t, 60)
	var busy atomic.Bool
	busy.Store(true)
	locks := lockedRows{busy: func(row []byte) bool { return busy.Load() && string(row) < "doc0030" }}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := scanner.New(f.w, &scanner.Options{Tables: f.reg.Tables, Scanners: 2, IdleWait: time.Millisecond, Locks: locks, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	waitUntil(t, func() bool { return s.Stats().Ran.Load() >= 30 }, func() string {
		return fmt.Sprintf("only %d free rows processed", s.Stats().Ran.Load())
	})
	if s.Stats().Jumps.Load() == 0 || s.Stats().Contended.Load() == 0 {
		t.Fatalf("no jump on contended rows: %d jumps", s.Stats().Jumps.Load())
	}
	busy.Store(false) // the other scanner is done
	f.waitIdle(t, f.st)
	cancel()
	<-done
	if r := s.Stats().Ran.Load(); r != 60 {
		t.Fatalf("%d runs, want 60", r)
	}
}

// Rule: an idle scanner pauses for IdleWait between passes, and Wake ends
// the pause, so a notification committed while it sleeps is processed
// without waiting out the poll interval (here an hour).
func TestWakeEndsTheIdlePause(t *testing.T) {
	f := newFixture(t, countRuns)
	// Both scanners found nothing and pause (for an hour, unless woken).
	s := idleScanner(t, f, 2)
	f.write(t, 3)
	s.Wake()
	f.waitIdle(t, f.st)
	if got := s.Stats().Ran.Load(); got != 3 {
		t.Fatalf("ran %d observer transactions, want 3", got)
	}
}

// Rule: an idle scanner's pause grows while passes find nothing, and a
// Wake brings it back to IdleWait. With IdleWait 1ms and no bound, ten
// empty passes leave a pause of at least 512ms that keeps doubling. After
// a Wake, k pauses add up to about 2^k ms (1 + 2 + 4 ...); without the
// reset each would be 1024ms or more. The lengths are the nominal ones
// (before jitter, from Stats.Paused), so nothing here depends on how fast
// the machine is.
func TestWakeResetsTheGrowingPause(t *testing.T) {
	f := newFixture(t, countRuns)
	s, err := scanner.New(f.w, &scanner.Options{Tables: f.reg.Tables, Scanners: 1, IdleWait: time.Millisecond, MaxIdleWait: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	startIdle(t, s, 10)
	p0, paused0 := s.Stats().Pauses.Load(), s.Stats().Paused.Load()
	s.Wake()
	waitPauses(t, s, p0+3)
	d := time.Duration(s.Stats().Paused.Load() - paused0)
	k := s.Stats().Pauses.Load() - p0
	if d >= time.Duration(k)*512*time.Millisecond {
		t.Fatalf("%d pauses after a Wake add up to %v: the pause did not go back to IdleWait", k, d)
	}
}

// idleScanner returns a scanner of f's notifications with n scanning
// goroutines that pause for an hour between passes, running until the
// test ends, once they all paused after a pass that found nothing.
func idleScanner(t *testing.T, f *fixture, n int) *scanner.Scanner {
	t.Helper()
	s, err := scanner.New(f.w, &scanner.Options{Tables: f.reg.Tables, Scanners: n, IdleWait: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	startIdle(t, s, n)
	return s
}

// startIdle runs s until the test ends and returns once its scanning
// goroutines (n of them) all paused after a pass that found nothing.
func startIdle(t *testing.T, s *scanner.Scanner, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitPauses(t, s, uint64(n))
}

// waitUntil polls cond until it holds, and fails the test with what
// (what was awaited, as things stand) if a minute goes by first.
func waitUntil(t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal(what())
		}
	}
}

// waitPauses waits until s paused n times in all.
func waitPauses(t *testing.T, s *scanner.Scanner, n uint64) {
	t.Helper()
	waitUntil(t, func() bool { return s.Stats().Pauses.Load() >= n }, func() string {
		return fmt.Sprintf("the scanner paused %d times in all in a minute, want %d", s.Stats().Pauses.Load(), n)
	})
}

// Rule: the rows a commit notified reach the scanner through the DB's
// Notified hook, with the columns notified in each, and it runs their
// observers at once, without a pass over the notifications and without
// reading the rows' notifications first: here the scanners pause for an
// hour and make no pass, yet every notification is processed, and no scan
// sees one.
func TestHintedRowsRunWithoutAPass(t *testing.T) {
	f := newFixture(t, countRuns)
	s := idleScanner(t, f, 2)
	hintingDB(t, f, s)
	passes := s.Stats().Passes.Load()
	f.write(t, 120) // three commits of 50, 50 and 20 rows
	f.waitIdle(t, f.st)
	st := s.Stats()
	if got := st.Ran.Load(); got != 120 {
		t.Fatalf("ran %d observer transactions, want 120", got)
	}
	if p := st.Passes.Load(); p != passes {
		t.Errorf("%d passes after the scanners paused, want none", p-passes)
	}
	if h := st.Hinted.Load(); h != 120 {
		t.Errorf("looked at %d hinted rows, want 120", h)
	}
	if n, found := st.Named.Load(), st.Found.Load(); n != 120 || found != 0 {
		t.Errorf("%d notifications run as hints named them and %d found by scans, want 120 and none", n, found)
	}
}

// Rule: hints past the bound of the queue are dropped, and the scanner
// makes a pass instead, so that nothing waits for IdleWait.
func TestTooManyHintsWakeTheScanner(t *testing.T) {
	f := newFixture(t, countRuns)
	s := idleScanner(t, f, 1)
	const rows = 5000
	f.write(t, rows)
	hints := make([]scanner.Row, rows)
	for i := range hints {
		hints[i] = scanner.Row{Table: "docs", Row: []byte(fmt.Sprintf("doc%04d", i))}
	}
	s.Hint(hints...)
	f.waitIdle(t, f.st)
	if got := s.Stats().Ran.Load(); got != rows {
		t.Fatalf("ran %d observer transactions, want %d", got, rows)
	}
	if d := s.Stats().HintsDropped.Load(); d != 1 {
		t.Errorf("%d Hint calls dropped rows, want 1", d)
	}
}
