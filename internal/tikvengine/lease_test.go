package tikvengine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/enginetest"
	"github.com/trickle-dev/trickle/internal/tikvengine"
)

// A transaction begins only while the process's lease holds; one whose
// lease lapsed after it read (the process paused past it, and a
// collection may have passed the transaction) fails at its next read and
// at its commit, writing nothing, with ErrLeaseLost.
func TestTheLeaseGuardsReadsAndCommits(t *testing.T) {
	l := enginetest.NewLease()
	db, _ := open(t, &tikvengine.Options{Lease: l, MaxAttempts: 1})
	set(t, db, "r", colA, "1")

	err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		if _, err := tx.Get(ctx, "t", []byte("r"), colA); err != nil {
			return err
		}
		l.Set(2, true) // lapsed and taken again: a new term
		return tx.Set("t", []byte("r"), colA, []byte("2"))
	})
	if !errors.Is(err, engine.ErrLeaseLost) || !errors.Is(err, engine.ErrSnapshotTooOld) {
		t.Fatalf("commit after the lease lapsed: %v, want ErrLeaseLost and ErrSnapshotTooOld", err)
	}
	if v, _ := get(t, db, 0, "r", colA); v != "1" {
		t.Fatalf("after the refused commit the cell holds %q, want 1", v)
	}

	err = db.Transact(bg, engine.TxnOptions{ReadOnly: true}, func(ctx context.Context, tx engine.Txn) error {
		l.Set(2, false)
		_, err := tx.Get(ctx, "t", []byte("r"), colA)
		return err
	})
	if !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("a read after the lease lapsed: %v, want ErrLeaseLost", err)
	}
	if err := db.Transact(bg, engine.TxnOptions{}, func(context.Context, engine.Txn) error { return nil }); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("a transaction begun without the lease: %v, want ErrLeaseLost", err)
	}
}
