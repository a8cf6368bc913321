package percolator

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/store"
)

// downStore fails every Apply and ApplyAll while down is set, as a store reached over a
// network does while its owner is gone.
type downStore struct {
	store.Store
	down atomic.Bool
}

func (s *downStore) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	if s.down.Load() {
		return store.RowResult{FailedCheck: -1}, store.ErrUnavailable
	}
	return s.Store.Apply(ctx, txn)
}

func (s *downStore) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	if s.down.Load() {
		return nil, store.ErrUnavailable
	}
	return s.Store.ApplyAll(ctx, txns)
}

// Rule: a transaction whose commit is cut short after prewriting (the store
// stopped answering, so its own cleanup failed too) leaves locks; its own
// process knows nobody will finish it and resolves them at once, instead of
// blocking its next transactions on the same cells for a whole lock TTL.
func TestOwnAbandonedLocksDoNotWaitForTTL(t *testing.T) {
	e := newEnv(t)
	ds := &downStore{Store: e.st}
	var tripped atomic.Bool
	db, err := New(ds, e.or, &Options{
		WorkerID: "loader", Liveness: e.live, LockTTL: time.Hour, MaxAttempts: 3, Logger: quietLogger(),
		// The store goes away right after the primary's prewrite.
		DisableOnePhase: true, // the faults are two-phase steps
		Faults: func(step CommitStep, _ uint64) error {
			if step == StepPrimaryPrewritten && tripped.CompareAndSwap(false, true) {
				ds.down.Store(true)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, b := []byte("a"), []byte("b")
	err = db.Update(ctx, func(ctx context.Context, tx *Txn) error {
		if err := tx.Set("t", a, colA, []byte("1")); err != nil {
			return err
		}
		return tx.Set("t", b, colA, []byte("1"))
	})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("commit with the store gone: %v, want ErrUnavailable", err)
	}
	ds.down.Store(false)
	locked := false
	for c, err := range e.st.Scan(ctx, store.ScanRequest{Table: "t"}) {
		if err != nil {
			t.Fatal(err)
		}
		locked = locked || string(c.Row) == "a"
	}
	if !locked {
		t.Fatal("the cut-short commit left no trace on its primary; the test proves nothing")
	}

	// Another process with the same view of liveness (the loader is alive)
	// must still wait: only the DB that gave up knows.
	other := e.db(t, "other", func(o *Options) { o.MaxAttempts = 1; o.LockTTL = time.Hour })
	err = other.Update(ctx, func(ctx context.Context, tx *Txn) error { return tx.Set("t", a, colA, []byte("x")) })
	if !errors.Is(err, ErrLockConflict) {
		t.Fatalf("another worker wrote over a live holder's lock: %v", err)
	}

	if err := db.Update(ctx, func(ctx context.Context, tx *Txn) error {
		if err := tx.Set("t", a, colA, []byte("2")); err != nil {
			return err
		}
		return tx.Set("t", b, colA, []byte("2"))
	}); err != nil {
		t.Fatalf("the same DB's next write of the cells: %v", err)
	}
	if got := readString(t, db, "a"); got != "2" {
		t.Fatalf("a = %q, want 2", got)
	}
}

func readString(t *testing.T, db *DB, row string) string {
	t.Helper()
	var v []byte
	if err := db.View(context.Background(), func(ctx context.Context, tx *Txn) (err error) {
		v, err = tx.Get(ctx, "t", []byte(row), colA)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return string(v)
}
