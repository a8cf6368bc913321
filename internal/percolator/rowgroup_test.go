package percolator

import (
	"context"
	"errors"
	"testing"
)

// Rule: the secondaries a transaction writes in one row are prewritten in
// one row transaction, all or none. A conflict on one cell leaves no lock
// on the row's other cells, and a crash after the secondaries' prewrite
// leaves all of them to one resolution.
func TestCellsOfOneRowPrewriteTogether(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	db := e.db(t, "w1", nil)
	a, b, c := Column{Family: "f", Qualifier: "a"}, Column{Family: "f", Qualifier: "b"}, Column{Family: "f", Qualifier: "c"}
	put := func(db *DB, row string, cols ...Column) error {
		return db.Update(ctx, func(ctx context.Context, tx *Txn) error {
			for _, col := range cols {
				if err := tx.Set("t", []byte(row), col, []byte(row+col.Qualifier)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := put(db, "r1", a, b, c); err != nil {
		t.Fatal(err)
	}

	// A transaction writes r0 (its primary) and r1's a, b, c; another one
	// commits r1:b after it started.
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []Column{a, b, c} {
		if err := tx.Set("t", []byte("r1"), col, []byte("new")); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Set("t", []byte("r0"), a, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := put(db, "r1", b); err != nil {
		t.Fatal(err)
	}
	err = tx.Commit(ctx)
	var ce *ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, ErrWriteConflict) || string(ce.Row) != "r1" || ce.Column != b {
		t.Fatalf("commit: %v, want a write conflict on r1/f:b", err)
	}
	// Nothing of the failed transaction is left: reads do not wait and see
	// the old values.
	err = db.View(ctx, func(ctx context.Context, tx *Txn) error {
		for _, col := range []Column{a, c} {
			v, err := tx.Get(ctx, "t", []byte("r1"), col)
			if err != nil || string(v) != "r1"+col.Qualifier {
				t.Errorf("r1/%s = %q, %v", col, v, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if db.Stats().LockWaits.Load() != 0 {
		t.Errorf("%d reads waited for locks", db.Stats().LockWaits.Load())
	}

	// A crash right after the secondaries' prewrite: a reader of another
	// worker finds three locks on r1 and rolls all of them back once the
	// writer is known dead.
	crashing := e.db(t, "w2", crashAt(StepPrewritten))
	err = crashing.Update(ctx, func(ctx context.Context, tx *Txn) error {
		for _, col := range []Column{a, b, c} {
			if err := tx.Set("t", []byte("r1"), col, []byte("crashed")); err != nil {
				return err
			}
		}
		return tx.Set("t", []byte("r0"), a, []byte("crashed"))
	})
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("crashing commit: %v", err)
	}
	e.live.Kill("w2")
	err = db.View(ctx, func(ctx context.Context, tx *Txn) error {
		for _, col := range []Column{a, b, c} {
			if v, err := tx.Get(ctx, "t", []byte("r1"), col); err != nil || string(v) != "r1"+col.Qualifier {
				t.Errorf("after the crash, r1/%s = %q, %v", col, v, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := db.Stats().RolledBack.Load(); n < 3 {
		t.Errorf("%d cells rolled back, want the 3 secondaries at least", n)
	}
}
