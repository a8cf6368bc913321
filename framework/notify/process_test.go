package notify

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/percolator"
	"github.com/trickle-dev/trickle/internal/published"
	"github.com/trickle-dev/trickle/remote/remotetest"
)

var (
	colA = Column{Family: "c", Qualifier: "a"}
	colB = Column{Family: "c", Qualifier: "b"}
	colC = Column{Family: "c", Qualifier: "c"}
	colW = Column{Family: "c", Qualifier: "weak"}
)

func noop(context.Context, *framework.Txn, []byte, Column) error { return nil }

// obsEnv is a store with a registry of observers and a worker.
type obsEnv struct {
	*env
	reg  *framework.Registry
	main *percolator.DB // the worker's DB
	w    *Processor
}

func newObsEnv(t *testing.T, observers ...framework.Observer) *obsEnv {
	return newObsEnvOn(t, newEnv(t), observers...)
}

// newServedObsEnv is newObsEnv with every DB on the store served over NATS
// by a service that draws reads' timestamps from the env's oracle, as in a
// runner that does not own the store: transactions, observer runs
// included, take the snapshot their first read chooses.
func newServedObsEnv(t *testing.T, observers ...framework.Observer) *obsEnv {
	e := newEnv(t)
	e.dbStore = remotetest.Serve(t, e.st, e.srv).Store
	return newObsEnvOn(t, e, observers...)
}

// obsEnvMaker makes an obsEnv: newObsEnv or newServedObsEnv.
type obsEnvMaker func(t *testing.T, observers ...framework.Observer) *obsEnv

// bothWays runs a rule's test with transactions whose snapshots are
// drawn from the oracle first, and with snapshots the store chooses.
func bothWays(t *testing.T, test func(*testing.T, obsEnvMaker)) {
	t.Run("oracle", func(t *testing.T) { test(t, newObsEnv) })
	t.Run("store-chosen", func(t *testing.T) { test(t, newServedObsEnv) })
}

func newObsEnvOn(t *testing.T, e *env, observers ...framework.Observer) *obsEnv {
	reg := framework.NewRegistry()
	for _, o := range observers {
		if err := reg.Register(o); err != nil {
			t.Fatal(err)
		}
	}
	db := e.db(t, "worker", func(o *percolator.Options) { o.Observed = observedBy(reg) })
	return &obsEnv{env: e, reg: reg, main: db, w: NewProcessor(frontDB(db), reg)}
}

// pending lists the notifications in the notify group.
func (e *obsEnv) pending(t *testing.T) []Notification {
	t.Helper()
	var out []Notification
	for _, table := range e.reg.Tables() {
		for n, err := range Find(context.Background(), e.st, table, nil, nil) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
	}
	return out
}

// drain processes notifications until none is left.
func (e *obsEnv) drain(t *testing.T) {
	t.Helper()
	for round := 0; ; round++ {
		ns := e.pending(t)
		if len(ns) == 0 {
			return
		}
		if round > 100 {
			t.Fatalf("notifications keep coming: %v", ns)
		}
		for _, n := range ns {
			if _, err := e.w.Process(context.Background(), n); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (e *obsEnv) set(t *testing.T, db *percolator.DB, row string, col Column, v string) {
	t.Helper()
	if err := db.Update(context.Background(), func(ctx context.Context, tx *percolator.Txn) error {
		return tx.Set("t", []byte(row), col, []byte(v))
	}); err != nil {
		t.Fatal(err)
	}
}

func (e *obsEnv) get(t *testing.T, row string, col Column) string {
	t.Helper()
	var v []byte
	err := e.main.View(context.Background(), func(ctx context.Context, tx *percolator.Txn) (err error) {
		v, err = tx.Get(ctx, "t", []byte(row), col)
		return err
	})
	if errors.Is(err, percolator.ErrNotFound) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(v)
}

// counter is an observer that counts its committed runs in a cell.
func counter(name string, col Column) framework.Observer {
	return framework.Observer{Name: name, Table: "t", Columns: []Column{col}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c Column) error {
			n := 0
			if v, err := tx.Get(ctx, "t", row, colC); err == nil {
				n, _ = strconv.Atoi(string(v))
			} else if !errors.Is(err, framework.ErrNotFound) {
				return err
			}
			return tx.Set("t", row, colC, []byte(strconv.Itoa(n+1)))
		}}
}

// Rule: of many concurrent attempts to process one notification, at most
// one observer transaction commits; they collide on the ack column.
func TestAtMostOneCommitPerNotification(t *testing.T) {
	bothWays(t, testAtMostOneCommitPerNotification)
}

func testAtMostOneCommitPerNotification(t *testing.T, newObsEnv obsEnvMaker) {
	e := newObsEnv(t, counter("count", colA))
	e.set(t, e.main, "r", colA, "x")
	var wg sync.WaitGroup
	var ran atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := NewProcessor(frontDB(e.db(t, fmt.Sprintf("dup%d", g), func(o *percolator.Options) { o.Observed = observedBy(e.reg) })), e.reg)
			out, err := w.Process(context.Background(), Notification{Table: "t", Row: []byte("r"), Column: colA})
			if err != nil {
				t.Error(err)
			}
			if out == OutcomeRan {
				ran.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := e.get(t, "r", colC); got != "1" {
		t.Fatalf("observer committed %s times, want 1", got)
	}
	if ran.Load() != 1 {
		t.Fatalf("%d attempts report a committed run, want 1", ran.Load())
	}
	if p := e.pending(t); len(p) != 0 {
		t.Fatalf("notification left behind: %v", p)
	}
}

// Rule: several writes before a run collapse into one run, which sees the
// latest value and removes every notification it covers.
func TestMessageCollapsing(t *testing.T) { bothWays(t, testMessageCollapsing) }

func testMessageCollapsing(t *testing.T, newObsEnv obsEnvMaker) {
	var seen []string
	o := framework.Observer{Name: "see", Table: "t", Columns: []Column{colA}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c Column) error {
			v, err := tx.Get(ctx, "t", row, c)
			seen = append(seen, string(v))
			return err
		}}
	e := newObsEnv(t, o)
	for i := range 3 {
		e.set(t, e.main, "r", colA, strconv.Itoa(i))
	}
	e.drain(t)
	if len(seen) != 1 || seen[0] != "2" {
		t.Fatalf("runs saw %v, want one run seeing 2", seen)
	}
	if c := e.w.Stats().Collapsed.Load(); c != 2 {
		t.Errorf("collapsed %d notifications, want 2", c)
	}
	// Processing again finds nothing new.
	out, err := e.w.Process(context.Background(), Notification{Table: "t", Row: []byte("r"), Column: colA})
	if err != nil || out != OutcomeNone {
		t.Fatalf("second process: %v %v", out, err)
	}
}

// Rule: a write that lands while the observer runs keeps its notification,
// so the next run sees it (the processed notification is removed "as of"
// the run's snapshot, not blindly).
func TestNotificationWrittenDuringRunSurvives(t *testing.T) {
	bothWays(t, testNotificationWrittenDuringRunSurvives)
}

func testNotificationWrittenDuringRunSurvives(t *testing.T, newObsEnv obsEnvMaker) {
	var e *obsEnv
	var other *percolator.DB
	runs := 0
	o := framework.Observer{Name: "see", Table: "t", Columns: []Column{colA}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c Column) error {
			runs++
			if runs == 1 {
				e.set(t, other, "r", colA, "written during the run")
			}
			return tx.Set("t", row, colB, []byte("run"+strconv.Itoa(runs)))
		}}
	e = newObsEnv(t, o)
	other = e.db(t, "other", func(op *percolator.Options) { op.Observed = observedBy(e.reg) })
	e.set(t, e.main, "r", colA, "first")
	if _, err := e.w.Process(context.Background(), Notification{Table: "t", Row: []byte("r"), Column: colA}); err != nil {
		t.Fatal(err)
	}
	if p := e.pending(t); len(p) != 1 {
		t.Fatalf("pending after the first run: %v, want the concurrent write's notification", p)
	}
	e.drain(t)
	if runs != 2 || e.get(t, "r", colB) != "run2" {
		t.Fatalf("runs=%d, last=%s: the concurrent write was not observed", runs, e.get(t, "r", colB))
	}
}

// Rule: observers chain: A writes what B observes.
func TestObserverChain(t *testing.T) {
	copyTo := func(name string, from, to Column) framework.Observer {
		return framework.Observer{Name: name, Table: "t", Columns: []Column{from}, Kind: framework.Strong,
			Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c Column) error {
				v, err := tx.Get(ctx, "t", row, c)
				if err != nil {
					return err
				}
				return tx.Set("t", row, to, append(v, '+'))
			}}
	}
	e := newObsEnv(t, copyTo("a-to-b", colA, colB), copyTo("b-to-c", colB, colC))
	e.set(t, e.main, "r", colA, "v")
	e.drain(t)
	if got := e.get(t, "r", colC); got != "v++" {
		t.Fatalf("end of chain = %q, want v++", got)
	}
}

// Rule: the notification is written with the prewrite, so a crash right
// after the commit point (secondaries still locked) cannot lose it.
func TestNotificationSurvivesCrashAfterCommitPoint(t *testing.T) {
	var seen []string
	o := framework.Observer{Name: "see", Table: "t", Columns: []Column{colA, colB}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c Column) error {
			v, err := tx.Get(ctx, "t", row, c)
			seen = append(seen, string(row)+"="+string(v))
			return err
		}}
	e := newObsEnv(t, o)
	crashing := e.db(t, "crashing", func(op *percolator.Options) {
		op.Observed = observedBy(e.reg)
		op.DisableOnePhase = true // the faults are two-phase steps
		op.Faults = func(step percolator.CommitStep, _ uint64) error {
			if step == percolator.StepCommitted {
				return errors.New("power cut")
			}
			return nil
		}
	})
	err := crashing.Update(context.Background(), func(ctx context.Context, tx *percolator.Txn) error {
		if err := tx.Set("t", []byte("p"), colA, []byte("1")); err != nil {
			return err
		}
		return tx.Set("t", []byte("s"), colB, []byte("2"))
	})
	if !errors.Is(err, percolator.ErrCrashed) {
		t.Fatalf("commit: %v, want the injected crash", err)
	}
	e.live.Kill("crashing")
	e.drain(t)
	if len(seen) != 2 || seen[0] != "p=1" || seen[1] != "s=2" {
		t.Fatalf("observer saw %v, want both committed cells", seen)
	}
}

// Rule: an aborted writer's notification is removed without a run.
func TestAbortedWriterNotificationIsDropped(t *testing.T) {
	e := newObsEnv(t, counter("count", colA))
	crashing := e.db(t, "crashing", func(op *percolator.Options) {
		op.Observed = observedBy(e.reg)
		op.DisableOnePhase = true // the faults are two-phase steps
		op.Faults = func(step percolator.CommitStep, _ uint64) error {
			if step == percolator.StepPrewritten {
				return errors.New("died before the commit point")
			}
			return nil
		}
	})
	_ = crashing.Update(context.Background(), func(ctx context.Context, tx *percolator.Txn) error {
		return tx.Set("t", []byte("r"), colA, []byte("never"))
	})
	e.live.Kill("crashing")
	e.drain(t)
	if got := e.get(t, "r", colC); got != "<none>" {
		t.Fatalf("observer ran %s times for a write that never committed", got)
	}
}

// Rule: weak notifications are requests on weak columns only; they trigger
// a run each time, and writing a weak column notifies nobody.
func TestWeakNotifications(t *testing.T) {
	var runs atomic.Int64
	weak := framework.Observer{Name: "weak", Table: "t", Columns: []Column{colW}, Kind: framework.Weak,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c Column) error { runs.Add(1); return nil }}
	e := newObsEnv(t, weak, counter("count", colA))
	ctx := context.Background()
	if err := e.main.NotifyWeak(ctx, "t", []byte("r"), colA); !errors.Is(err, percolator.ErrNotWeak) {
		t.Fatalf("weak notification on a strong column: %v", err)
	}
	if err := e.main.NotifyWeak(ctx, "t", []byte("r"), colB); !errors.Is(err, percolator.ErrNotWeak) {
		t.Fatalf("weak notification on an unobserved column: %v", err)
	}
	e.set(t, e.main, "r", colW, "writing a weak column")
	if p := e.pending(t); len(p) != 0 {
		t.Fatalf("a write to a weak column notified: %v", p)
	}
	for range 2 {
		if err := e.main.NotifyWeak(ctx, "t", []byte("r"), colW); err != nil {
			t.Fatal(err)
		}
		e.drain(t)
	}
	// Inside a transaction, the request is written with it.
	if err := e.main.Update(ctx, func(ctx context.Context, tx *percolator.Txn) error {
		if err := tx.Set("t", []byte("q"), colB, []byte("x")); err != nil {
			return err
		}
		return tx.NotifyWeak("t", []byte("q"), colW)
	}); err != nil {
		t.Fatal(err)
	}
	e.drain(t)
	if runs.Load() != 3 {
		t.Fatalf("weak observer ran %d times, want 3", runs.Load())
	}
	// Requests on rows the transaction writes ride in those rows'
	// prewrites (here a secondary's); others are written on their own.
	if err := e.main.Update(ctx, func(ctx context.Context, tx *percolator.Txn) error {
		for _, r := range []string{"a", "b"} {
			if err := tx.Set("t", []byte(r), colB, []byte("x")); err != nil {
				return err
			}
		}
		// Repeated requests for one cell are one notification.
		for _, r := range []string{"b", "z", "y", "z", "b"} {
			if err := tx.NotifyWeak("t", []byte(r), colW); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if p := e.pending(t); len(p) != 3 {
		t.Fatalf("pending after a transaction with 3 weak requests: %v", p)
	}
	e.drain(t)
	if runs.Load() != 6 {
		t.Fatalf("weak observer ran %d times, want 6", runs.Load())
	}
}

// Rule: a failing observer leaves its notification in place; it is retried
// later and does not affect other notifications.
func TestFailingObserverKeepsNotification(t *testing.T) {
	fail := true
	bad := framework.Observer{Name: "bad", Table: "t", Columns: []Column{colA}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c Column) error {
			if fail {
				return errors.New("boom")
			}
			return tx.Set("t", row, colC, []byte("fixed"))
		}}
	e := newObsEnv(t, bad, counter("good", colB))
	e.set(t, e.main, "r", colA, "x")
	e.set(t, e.main, "r", colB, "y")
	ctx := context.Background()
	if _, err := e.w.Process(ctx, Notification{Table: "t", Row: []byte("r"), Column: colA}); err == nil {
		t.Fatal("failing observer reported success")
	}
	if _, err := e.w.Process(ctx, Notification{Table: "t", Row: []byte("r"), Column: colB}); err != nil {
		t.Fatal(err)
	}
	if p := e.pending(t); len(p) != 1 || p[0].Column != colA {
		t.Fatalf("pending %v, want only the failing one", p)
	}
	fail = false
	e.drain(t)
	if got := e.get(t, "r", colC); got != "fixed" {
		t.Fatalf("retry did not run: %s", got)
	}
}

// The published observed set lets a process without observers notify.
func TestPublishedObservedSet(t *testing.T) {
	e := newObsEnv(t, counter("count", colA))
	ctx := context.Background()
	if err := Publish(ctx, e.st, e.reg); err != nil {
		t.Fatal(err)
	}
	ps, err := published.Load(ctx, e.st)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := ps.ObservedKind("t", colA); !ok || k != percolator.Strong || ps.Len() != 1 {
		t.Fatalf("loaded set: %v %v len %d", k, ok, ps.Len())
	}
	loader := e.db(t, "loader", func(o *percolator.Options) { o.Observed = ps })
	e.set(t, loader, "r", colA, "from the loader")
	e.drain(t)
	if got := e.get(t, "r", colC); got != "1" {
		t.Fatalf("observer runs = %s, want 1", got)
	}
	// Unpublishing the observer removes its entries.
	if _, err := Unpublish(ctx, e.st, "count"); err != nil {
		t.Fatal(err)
	}
	if ps, _ := published.Load(ctx, e.st); ps.Len() != 0 {
		t.Fatalf("stale entries after unpublishing: %d", ps.Len())
	}
}

// Rule: a notification whose writer was prewritten before the run started
// but committed after it (so the run could not see the write) stays for the
// next run, even though its version is older than the run's snapshot.
func TestNotificationOfWriteCommittedDuringRunSurvives(t *testing.T) {
	var seen []string
	o := framework.Observer{Name: "see", Table: "t", Columns: []Column{colA}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c Column) error {
			v, err := tx.Get(ctx, "t", row, c)
			seen = append(seen, string(v))
			return err
		}}
	e := newObsEnv(t, o)
	e.set(t, e.main, "r", colA, "old")
	release, paused := make(chan struct{}), make(chan struct{})
	slow := e.db(t, "slow", func(op *percolator.Options) {
		op.Observed = observedBy(e.reg)
		op.DisableOnePhase = true // the faults are two-phase steps
		op.Faults = func(step percolator.CommitStep, _ uint64) error {
			if step == percolator.StepPrewritten {
				close(paused)
				<-release
			}
			return nil
		}
	})
	done := make(chan error, 1)
	go func() {
		done <- slow.Update(context.Background(), func(ctx context.Context, tx *percolator.Txn) error {
			return tx.Set("t", []byte("r"), colA, []byte("new"))
		})
	}()
	<-paused // the slow writer's lock and notification are in place
	processed := make(chan error, 1)
	go func() {
		_, err := e.w.Process(context.Background(), Notification{Table: "t", Row: []byte("r"), Column: colA})
		processed <- err
	}()
	for e.main.Stats().LockWaits.Load() == 0 { // the run has started and waits on the lock
		select {
		case err := <-processed:
			t.Fatalf("run finished without meeting the writer's lock: %v", err)
		default:
		}
		runtime.Gosched()
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-processed; err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != "old" {
		t.Fatalf("first run saw %v, want the value from before the slow commit", seen)
	}
	e.drain(t)
	if len(seen) != 2 || seen[1] != "new" {
		t.Fatalf("runs saw %v: the write committed during the first run was never observed", seen)
	}
}

// Rule: the deletion of an observed cell runs its observer even when
// garbage collection has removed the cell's whole history before the
// notification is processed (a column whose newest version is a delete
// below the safe point is collected entirely). The claim then finds no
// write to compare with the ack; skipping the run there lost the
// deletion: a web page deleted while its notification waited out the
// collection lag kept its links in the index.
func TestDeletionCollectedBeforeItsRunStillRuns(t *testing.T) {
	var seen []string
	o := framework.Observer{Name: "see", Table: "t", Columns: []Column{colA}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c Column) error {
			v, err := tx.Get(ctx, "t", row, c)
			if errors.Is(err, framework.ErrNotFound) {
				v, err = []byte("(deleted)"), nil
			}
			seen = append(seen, string(v))
			return err
		}}
	e := newObsEnv(t, o)
	ctx := context.Background()
	e.set(t, e.main, "r", colA, "v")
	e.drain(t)
	if err := e.main.Update(ctx, func(ctx context.Context, tx *percolator.Txn) error {
		return tx.Delete("t", []byte("r"), colA)
	}); err != nil {
		t.Fatal(err)
	}
	gc := func() percolator.GCStats {
		t.Helper()
		e.clock.Advance(time.Second)
		st, err := e.main.GC(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := gc(); st.DeletionsKept != 1 {
		t.Errorf("collection kept %d deletions, want the pending one", st.DeletionsKept)
	}
	if n := len(e.pending(t)); n != 1 {
		t.Fatalf("%d notifications pending after the collection, want the deletion's", n)
	}
	e.drain(t)
	if strings.Join(seen, ",") != "v,(deleted)" {
		t.Fatalf("runs saw %q, want v then the deletion", seen)
	}
	// Once the deletion was observed, the next collection removes it.
	if st := gc(); st.DeletionsKept != 0 {
		t.Errorf("collection kept %d deletions after they were observed", st.DeletionsKept)
	}
	cells, err := e.st.ReadRow(ctx, "t", []byte("r"), []Column{colA}, nil)
	if err != nil || len(cells) != 0 {
		t.Fatalf("column after the second collection: %v %v, want nothing", cells, err)
	}
}

// countingOracle counts the timestamps drawn through it.
type countingOracle struct {
	percolator.Oracle
	n atomic.Int64
}

func (o *countingOracle) Timestamp(ctx context.Context) (uint64, error) {
	o.n.Add(1)
	return o.Oracle.Timestamp(ctx)
}

// Where the store chooses timestamps, a strong observer's run draws none
// from the oracle: its claim (the ack and the observed cell, read
// together) is its first read and chooses its snapshot, which sees the
// change that notified it, and the store chooses its commit timestamp.
func TestObserverRunTakesItsSnapshotFromItsClaim(t *testing.T) {
	var seen []string
	o := framework.Observer{Name: "see", Table: "t", Columns: []Column{colA}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, c Column) error {
			v, err := tx.Get(ctx, "t", row, c)
			if err != nil {
				return err
			}
			seen = append(seen, string(v))
			return tx.Set("t", row, colB, v)
		}}
	e := newEnv(t)
	e.dbStore = remotetest.Serve(t, e.st, e.srv).Store
	counting := &countingOracle{Oracle: e.or}
	e.or = counting
	oe := newObsEnvOn(t, e, o)
	for i := range 3 {
		oe.set(t, oe.main, "r", colA, strconv.Itoa(i))
		drawn := counting.n.Load()
		out, err := oe.w.Process(context.Background(), Notification{Table: "t", Row: []byte("r"), Column: colA})
		if err != nil || out != OutcomeRan {
			t.Fatalf("run %d: %v, %v", i, out, err)
		}
		if d := counting.n.Load() - drawn; d != 0 {
			t.Fatalf("run %d drew %d timestamps from the oracle, want 0", i, d)
		}
	}
	if fmt.Sprint(seen) != "[0 1 2]" || oe.get(t, "r", colB) != "2" {
		t.Fatalf("runs saw %v, wrote %s; want [0 1 2] and 2", seen, oe.get(t, "r", colB))
	}
	if p := oe.pending(t); len(p) != 0 {
		t.Fatalf("notifications left: %v", p)
	}
}
