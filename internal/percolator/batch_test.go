package percolator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// callCounter counts the row transaction calls a DB makes of its store,
// and the rows they carry.
type callCounter struct {
	store.Store
	mu                    sync.Mutex
	apply, applyAll, rows int
}

func (c *callCounter) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	c.mu.Lock()
	c.apply++
	c.rows++
	c.mu.Unlock()
	return c.Store.Apply(ctx, txn)
}

func (c *callCounter) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	c.mu.Lock()
	c.applyAll++
	c.rows += len(txns)
	c.mu.Unlock()
	return c.Store.ApplyAll(ctx, txns)
}

func (c *callCounter) counts() (apply, applyAll, rows int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.apply, c.applyAll, c.rows
}

// writeRows commits one transaction writing colA of rows r0..r(n-1).
func writeRows(t *testing.T, db *DB, n int, value string) error {
	t.Helper()
	return db.Update(bg, func(ctx context.Context, tx *Txn) error {
		for i := range n {
			if err := tx.Set("t", fmt.Appendf(nil, "r%03d", i), colA, []byte(value)); err != nil {
				return err
			}
		}
		return nil
	})
}

// A transaction's secondaries are prewritten, and committed, in batches of
// RowsPerApply rows, one store call each; the primary keeps its own calls
// (its prewrite goes first and its commit is the commit point).
func TestSecondariesGoToTheStoreInBatches(t *testing.T) {
	for _, tc := range []struct {
		rows, perApply int
		// want: Apply calls (primary prewrite + primary commit) and
		// ApplyAll calls for prewrite and commit of 99 secondaries.
		apply, applyAll int
	}{
		{rows: 100, perApply: 256, apply: 2, applyAll: 2},
		{rows: 100, perApply: 10, apply: 2, applyAll: 20},
		{rows: 100, perApply: 1, apply: 2 + 2*99, applyAll: 0},
	} {
		t.Run(fmt.Sprintf("RowsPerApply=%d", tc.perApply), func(t *testing.T) {
			e := newEnv(t)
			cc := &callCounter{Store: e.st}
			db, err := New(cc, e.or, &Options{WorkerID: "w", Liveness: e.live, Logger: quietLogger(), RowsPerApply: tc.perApply})
			if err != nil {
				t.Fatal(err)
			}
			if err := writeRows(t, db, tc.rows, "v"); err != nil {
				t.Fatal(err)
			}
			apply, applyAll, rows := cc.counts()
			if apply != tc.apply || applyAll != tc.applyAll || rows != 2*tc.rows {
				t.Fatalf("Apply %d, ApplyAll %d, rows %d; want %d, %d, %d", apply, applyAll, rows, tc.apply, tc.applyAll, 2*tc.rows)
			}
			// Every row committed: a reader sees all of them.
			if err := db.View(bg, func(ctx context.Context, tx *Txn) error {
				for i := range tc.rows {
					v, err := tx.Get(ctx, "t", fmt.Appendf(nil, "r%03d", i), colA)
					if err != nil || string(v) != "v" {
						return fmt.Errorf("r%03d: %q, %v", i, v, err)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Snapshot isolation: a write-write conflict on any one row of a batched
// prewrite aborts the whole transaction, and none of its other rows'
// values or locks stay behind.
func TestBatchedPrewriteConflictOnOneRowAbortsAll(t *testing.T) {
	e := newEnv(t)
	db := e.db(t, "w", func(o *Options) { o.RowsPerApply = 16 })
	tx, err := db.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := tx.Set("t", fmt.Appendf(nil, "r%03d", i), colA, []byte("loser")); err != nil {
			t.Fatal(err)
		}
	}
	// Another transaction commits row r037 (a secondary of tx, in its
	// third batch) after tx started.
	if err := db.Update(bg, func(ctx context.Context, o *Txn) error {
		return o.Set("t", []byte("r037"), colA, []byte("winner"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(bg); !errors.Is(err, ErrConflict) {
		t.Fatalf("Commit: %v, want a conflict", err)
	}
	if err := db.View(bg, func(ctx context.Context, r *Txn) error {
		for i := range 50 {
			v, err := r.Get(ctx, "t", fmt.Appendf(nil, "r%03d", i), colA)
			want := ""
			if i == 37 {
				want = "winner"
			}
			if err != nil && !errors.Is(err, ErrNotFound) || string(v) != want {
				return fmt.Errorf("r%03d: %q, %v; want %q", i, v, err, want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// No lock is left: a new writer of every row commits at once.
	if err := writeRows(t, db, 50, "after"); err != nil {
		t.Fatalf("writing after the aborted transaction: %v", err)
	}
}

// A store call that fails for a batch of secondaries aborts the
// transaction before its commit point: nothing becomes visible.
func TestBatchedPrewriteStoreErrorAbortsBeforeCommitPoint(t *testing.T) {
	e := newEnv(t)
	fs := &failingApplyAll{Store: e.st, failOn: 2}
	db, err := New(fs, e.or, &Options{WorkerID: "w", Liveness: e.live, Logger: quietLogger(), RowsPerApply: 8})
	if err != nil {
		t.Fatal(err)
	}
	err = writeRows(t, db, 40, "v")
	if err == nil || !errors.Is(err, errInjected) {
		t.Fatalf("Update: %v, want the injected store error", err)
	}
	plain := e.db(t, "reader", nil)
	if err := plain.View(bg, func(ctx context.Context, r *Txn) error {
		for i := range 40 {
			if v, err := r.Get(ctx, "t", fmt.Appendf(nil, "r%03d", i), colA); !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("r%03d: %q, %v; want not found", i, v, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

var (
	errInjected = errors.New("injected store failure")
	bg          = context.Background()
)

// failingApplyAll fails its failOn-th ApplyAll call (counting from 1).
type failingApplyAll struct {
	store.Store
	mu     sync.Mutex
	n      int
	failOn int
}

func (f *failingApplyAll) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	f.mu.Lock()
	f.n++
	fail := f.n == f.failOn
	f.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	return f.Store.ApplyAll(ctx, txns)
}

// Secondaries are committed on the evidence of the committer's own lock;
// when a reader rolled some forward between the commit point and the
// secondaries' commit (their locks are gone), those rows are committed
// again on the rollback record's evidence, and the transaction ends
// committed everywhere with nothing left locked.
func TestCommitSecondariesAfterAReaderRolledThemForward(t *testing.T) {
	e := newEnv(t)
	cc := &callCounter{Store: e.st}
	reader := e.db(t, "reader", nil)
	var db *DB
	var readErr error
	db, err := New(cc, e.or, &Options{WorkerID: "w", Liveness: e.live, Logger: quietLogger(), RowsPerApply: 256,
		DisableOnePhase: true, // the faults are two-phase steps
		Faults: func(step CommitStep, _ uint64) error {
			if step != StepCommitted {
				return nil
			}
			// Between the commit point and the secondaries: a reader
			// meets the locks of r005 and r006 and rolls them forward.
			readErr = reader.View(bg, func(ctx context.Context, r *Txn) error {
				for _, row := range []string{"r005", "r006"} {
					if v, err := r.Get(ctx, "t", []byte(row), colA); err != nil || string(v) != "v" {
						return fmt.Errorf("%s: %q, %v", row, v, err)
					}
				}
				return nil
			})
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeRows(t, db, 10, "v"); err != nil {
		t.Fatal(err)
	}
	if readErr != nil {
		t.Fatalf("reader at the commit point: %v", readErr)
	}
	// Prewrite: primary + one batch; commit: primary + one batch of 9
	// (2 refused) + one batch of the 2 again.
	if apply, applyAll, rows := cc.counts(); apply != 2 || applyAll != 3 || rows != 2+9+9+2 {
		t.Fatalf("Apply %d, ApplyAll %d, rows %d; want 2, 3, 22", apply, applyAll, rows)
	}
	if err := writeRows(t, e.db(t, "after", nil), 10, "w"); err != nil {
		t.Fatalf("a lock was left behind: %v", err)
	}
}
