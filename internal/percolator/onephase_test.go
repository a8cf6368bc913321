package percolator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// The rules of a one-phase commit (see store.AtomicApplier): every cell of a
// transaction written as committed in one atomic store write, at a
// commit timestamp the store draws, its rows pending until the write is
// visible.

// rawKinds counts the records of each kind in table t of the env's store.
func rawKinds(t *testing.T, e *env) map[protocol.Kind]int {
	t.Helper()
	n := map[protocol.Kind]int{}
	for c, err := range e.st.Scan(context.Background(), store.ScanRequest{Table: "t"}) {
		if err != nil {
			t.Fatal(err)
		}
		k, _ := protocol.Untag(c.Ts)
		n[k]++
	}
	return n
}

// hookedOracle is the env's oracle that runs during, if set, on its n-th
// draw (1-based) after the timestamp was drawn.
type hookedOracle struct {
	Oracle
	draws  atomic.Int64
	n      int64
	during func()
}

func (o *hookedOracle) Timestamp(ctx context.Context) (uint64, error) {
	ts, err := o.Oracle.Timestamp(ctx)
	if o.draws.Add(1) == o.n && err == nil && o.during != nil {
		o.during()
	}
	return ts, err
}

// atomicCounter is the env's store counting ApplyAtomic calls; with
// cannot it answers them as a store that cannot write atomically, with
// lose it writes and then loses the answer, as a connection dropped at
// the wrong moment does. With checks set, it records how many checks
// each row (table/row) of the calls carried. While noTimestamp is
// positive, a call takes one from it and fails as that of a store whose
// oracle is away: store.ErrNoTimestamp, nothing written.
type atomicCounter struct {
	*store.DB
	calls        atomic.Int64
	cannot, lose bool
	noTimestamp  atomic.Int64
	mu           sync.Mutex
	checks       map[string]int
}

func (a *atomicCounter) ApplyAtomic(ctx context.Context, txns []*store.RowTxn, rel []int, clock store.Clock) (uint64, []store.RowResult, error) {
	a.calls.Add(1)
	if a.checks != nil {
		a.mu.Lock()
		for _, t := range txns {
			a.checks[t.Table+"/"+string(t.Row)] = len(t.Checks)
		}
		a.mu.Unlock()
	}
	if a.cannot {
		return 0, nil, fmt.Errorf("test store: %w", errors.ErrUnsupported)
	}
	if a.noTimestamp.Add(-1) >= 0 {
		return 0, nil, fmt.Errorf("test store: the oracle is away: %w", store.ErrNoTimestamp)
	}
	ts, res, err := a.DB.ApplyAtomic(ctx, txns, rel, clock)
	if a.lose && err == nil {
		return 0, nil, fmt.Errorf("answer lost (test): %w", store.ErrUnavailable)
	}
	return ts, res, err
}

// A one-phase commit leaves write records and no lock, and its cells and
// notifications commit together.
func TestOnePhaseCommitWritesNoLock(t *testing.T) {
	e := newEnv(t)
	st := &atomicCounter{DB: e.st.(*store.DB)}
	db := e.dbWith(t, st, &Options{WorkerID: "w", Logger: quietLogger(), Observed: observing(Strong, "t", col("v"))})
	set(t, db, "a", "1", "b", "2")
	if n := st.calls.Load(); n != 1 {
		t.Fatalf("%d atomic writes for one commit", n)
	}
	kinds := rawKinds(t, e)
	if kinds[protocol.KindLock] != 0 || kinds[protocol.KindWrite] != 2 {
		t.Fatalf("records by kind after a one-phase commit: %v", kinds)
	}
	notes := 0
	for c, err := range e.st.Scan(context.Background(), store.ScanRequest{Table: "t", Group: protocol.NotifyGroup}) {
		if err != nil {
			t.Fatal(err)
		}
		notes++
		_ = c
	}
	if notes != 2 {
		t.Fatalf("%d notifications, want 2", notes)
	}
	for _, row := range []string{"a", "b"} {
		if v, err := viewGet(db, row, col("v")); err != nil || v != map[string]string{"a": "1", "b": "2"}[row] {
			t.Fatalf("%s = %q, %v", row, v, err)
		}
	}
}

// Rule: a snapshot drawn while a one-phase commit is being written (after
// its commit timestamp) must see the commit, though no lock announces it:
// the store makes reads of its rows wait until the write is visible. A
// reader that starts right after the commit timestamp is drawn finds the
// value.
func TestSnapshotDrawnDuringOnePhaseCommitSeesIt(t *testing.T) {
	e := newEnv(t)
	// A blind write draws its start timestamp, then the store draws the
	// commit timestamp: the second draw.
	or := &hookedOracle{Oracle: e.or, n: 2}
	db, err := New(e.st, or, &Options{WorkerID: "w", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	reader := e.db(t, "reader", nil)
	seen := make(chan string, 1)
	or.during = func() {
		read := make(chan struct{})
		go func() {
			defer close(read)
			v, err := viewGet(reader, "a", col("v"))
			if err != nil && !errors.Is(err, ErrNotFound) {
				t.Error(err)
			}
			seen <- v
		}()
		// Give a reader that does not wait every chance to read before
		// the write.
		select {
		case <-read:
		case <-time.After(100 * time.Millisecond):
		}
	}
	set(t, db, "a", "1")
	if v := <-seen; v != "1" {
		t.Fatalf("a snapshot drawn during the commit read %q, want the commit's 1", v)
	}
}

// Rule: a one-phase commit conflicts as a two-phase one does. A live
// lock in the way fails it (nothing written), a dead holder's lock is
// resolved and the commit goes through, and a write committed after its
// start fails it.
func TestOnePhaseCommitConflicts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	crashed := e.db(t, "crashed", crashAt(StepPrewritten))
	if err := crashed.Update(ctx, func(ctx context.Context, tx *Txn) error {
		return tx.Set("t", []byte("a"), col("v"), []byte("locked"))
	}); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crashing commit: %v", err)
	}
	one := e.db(t, "one", func(o *Options) { o.MaxAttempts = 1 })
	err := one.Update(ctx, func(ctx context.Context, tx *Txn) error {
		return tx.Set("t", []byte("a"), col("v"), []byte("mine"))
	})
	if !errors.Is(err, ErrLockConflict) {
		t.Fatalf("one-phase commit over a live lock: %v", err)
	}
	if kinds := rawKinds(t, e); kinds[protocol.KindWrite] != 0 {
		t.Fatalf("a failed one-phase commit wrote: %v", kinds)
	}
	e.live.Kill("crashed")
	if err := one.Update(ctx, func(ctx context.Context, tx *Txn) error {
		return tx.Set("t", []byte("a"), col("v"), []byte("mine"))
	}); err != nil {
		t.Fatalf("one-phase commit over a dead holder's lock: %v", err)
	}
	if v, err := viewGet(one, "a", col("v")); err != nil || v != "mine" {
		t.Fatalf("a = %q, %v", v, err)
	}

	tx, err := one.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Get(ctx, "t", []byte("a"), col("v")); err != nil {
		t.Fatal(err)
	}
	set(t, e.db(t, "other", nil), "a", "theirs")
	if err := tx.Set("t", []byte("a"), col("v"), []byte("stale")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); !errors.Is(err, ErrWriteConflict) {
		t.Fatalf("one-phase commit after a later write: %v", err)
	}
}

// A transaction falls back to two phases when its store cannot write
// atomically, and stops asking for a while; and when its rows do not fit
// in one atomic write.
func TestOnePhaseFallsBackToTwoPhases(t *testing.T) {
	e := newEnv(t)
	st := &atomicCounter{DB: e.st.(*store.DB), cannot: true}
	db := e.dbWith(t, st, &Options{WorkerID: "w", Logger: quietLogger()})
	set(t, db, "a", "1")
	set(t, db, "b", "2")
	if n := st.calls.Load(); n != 1 {
		t.Fatalf("%d atomic writes asked of a store that cannot, want 1", n)
	}
	if v, err := viewGet(db, "b", col("v")); err != nil || v != "2" {
		t.Fatalf("b = %q, %v", v, err)
	}

	st = &atomicCounter{DB: e.st.(*store.DB)}
	wide := e.dbWith(t, st, &Options{WorkerID: "wide", Logger: quietLogger(), OnePhaseMaxRows: 2})
	set(t, wide, "c", "3", "d", "4", "e", "5")
	if n := st.calls.Load(); n != 0 {
		t.Fatalf("a commit of 3 rows with OnePhaseMaxRows 2 made %d atomic writes", n)
	}
	set(t, wide, "c", "6", "d", "7")
	if n := st.calls.Load(); n != 1 {
		t.Fatalf("a commit of 2 rows with OnePhaseMaxRows 2 made %d atomic writes, want 1", n)
	}
	if v, err := viewGet(wide, "e", col("v")); err != nil || v != "5" {
		t.Fatalf("e = %q, %v", v, err)
	}
}

// A one-phase commit carries what a two-phase one does: a value too long
// to inline (its data record at the start timestamp) and a delete.
func TestOnePhaseCommitOfLongValuesAndDeletes(t *testing.T) {
	e := newEnv(t)
	st := &atomicCounter{DB: e.st.(*store.DB)}
	db := e.dbWith(t, st, &Options{WorkerID: "w", Logger: quietLogger()})
	long := strings.Repeat("x", 4*db.Options().ShortValueMax)
	set(t, db, "a", long, "b", "short")
	if err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
		return tx.Delete("t", []byte("b"), col("v"))
	}); err != nil {
		t.Fatal(err)
	}
	if n := st.calls.Load(); n != 2 {
		t.Fatalf("%d atomic writes for two commits", n)
	}
	if kinds := rawKinds(t, e); kinds[protocol.KindData] != 1 || kinds[protocol.KindLock] != 0 {
		t.Fatalf("records by kind: %v, want one data record and no lock", kinds)
	}
	if v, err := viewGet(db, "a", col("v")); err != nil || v != long {
		t.Fatalf("a = %d bytes, %v; want the %d written", len(v), err, len(long))
	}
	if v, err := viewGet(db, "b", col("v")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b after its delete = %q, %v", v, err)
	}
}

// A one-phase commit whose context ends before the store drew its
// timestamp fails with the context's error, not an unknown outcome: the
// store says nothing was written.
func TestOnePhaseCommitCanceledIsNotUnknown(t *testing.T) {
	e := newEnv(t)
	db := e.db(t, "w", nil)
	ctx, cancel := context.WithCancel(context.Background())
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Set("t", []byte("a"), col("v"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	cancel()
	err = tx.Commit(ctx)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, store.ErrNoTimestamp) || errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("commit with its context canceled: %v, want context.Canceled and store.ErrNoTimestamp, not ErrCommitUnknown", err)
	}
	if kinds := rawKinds(t, e); len(kinds) != 0 {
		t.Fatalf("records written: %v", kinds)
	}
}

// A one-phase commit whose answer is lost has an unknown outcome, is not
// retried, and a reader finds it committed whole: nothing is left to
// resolve.
func TestOnePhaseCommitWithItsAnswerLost(t *testing.T) {
	e := newEnv(t)
	st := &atomicCounter{DB: e.st.(*store.DB), lose: true}
	db := e.dbWith(t, st, &Options{WorkerID: "w", Logger: quietLogger()})
	err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
		for _, row := range []string{"a", "b"} {
			if err := tx.Set("t", []byte(row), col("v"), []byte("x")); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, ErrCommitUnknown) || st.calls.Load() != 1 {
		t.Fatalf("commit with its answer lost: %v after %d atomic writes, want ErrCommitUnknown after 1", err, st.calls.Load())
	}
	reader := e.db(t, "reader", nil)
	for _, row := range []string{"a", "b"} {
		if v, err := viewGet(reader, row, col("v")); err != nil || v != "x" {
			t.Fatalf("%s after the lost answer: %q, %v; want the committed x", row, v, err)
		}
	}
	if n := reader.Stats().RolledForward.Load() + reader.Stats().RolledBack.Load(); n != 0 {
		t.Fatalf("the reader resolved %d cells of a commit that left no lock", n)
	}
}

// A transaction of some hundreds of rows (a real web page's run: one row
// per term and per link target) still commits in one phase, in one atomic
// write, up to OnePhaseMaxRows rows; an unusable limit is refused, naming
// the field.
func TestOnePhaseCommitOfManyRows(t *testing.T) {
	e := newEnv(t)
	st := &atomicCounter{DB: e.st.(*store.DB)}
	db := e.dbWith(t, st, &Options{WorkerID: "w", Logger: quietLogger()})
	var kv []string
	for i := range 600 {
		kv = append(kv, fmt.Sprintf("row%04d", i), fmt.Sprint(i))
	}
	set(t, db, kv...)
	if n := st.calls.Load(); n != 1 {
		t.Fatalf("a commit of 600 rows made %d atomic writes, want 1", n)
	}
	if v, err := viewGet(db, "row0599", col("v")); err != nil || v != "599" {
		t.Fatalf("row0599 = %q, %v", v, err)
	}
	for _, n := range []int{-1, store.MaxApplyAll + 1} {
		if _, err := New(e.st, e.or, &Options{WorkerID: "w", Logger: quietLogger(), OnePhaseMaxRows: n}); err == nil || !strings.Contains(err.Error(), "OnePhaseMaxRows") {
			t.Errorf("OnePhaseMaxRows %d: %v, want an error naming it", n, err)
		}
	}
}
