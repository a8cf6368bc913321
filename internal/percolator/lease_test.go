package percolator

import (
	"context"
	"errors"
	"testing"

	"github.com/trickle-dev/trickle/internal/enginetest"
	"github.com/trickle-dev/trickle/store"
)

// Rule (a paused process never answers from a thinned snapshot): a
// process whose liveness lapsed (paused past its TTL) may have been passed
// by a collection that removed versions its running transaction reads. A
// read that ends after the lapse fails with ErrSnapshotTooOld instead of
// answering, even once the lease is taken again (a new term), and no
// transaction begins while the lease is lost.
func TestAPausedProcessNeverAnswersFromAThinnedSnapshot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	lease := enginetest.NewLease()
	paused := e.db(t, "paused", func(o *Options) { o.Lease = lease })
	writer := e.db(t, "writer", nil)
	set := func(row, v string) {
		t.Helper()
		if err := writer.Update(ctx, func(ctx context.Context, tx *Txn) error { return tx.Set("t", []byte(row), colA, []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	set("x", "x0")
	set("y", "y0")

	tx, err := paused.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := tx.Get(ctx, "t", []byte("x"), colA); err != nil || string(v) != "x0" {
		t.Fatalf("x: %q %v", v, err)
	}
	// The process pauses; its lease lapses; y is overwritten and a
	// collection, which no longer counts the process, removes y0.
	lease.Set(1, false)
	set("y", "y1")
	e.clock.Advance(1)
	if _, err := (e.db(t, "collector", nil)).GC(ctx, 0); err != nil {
		t.Fatal(err)
	}
	v, err := tx.Get(ctx, "t", []byte("y"), colA)
	if !errors.Is(err, ErrSnapshotTooOld) || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("after the lapse y reads %q %v; want ErrSnapshotTooOld (its version %q may be collected)", v, err, "y0")
	}
	if _, err := paused.Begin(ctx); !errors.Is(err, ErrLeaseLost) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a transaction began while the lease is lost: %v", err)
	}
	// The liveness is restored under a new term: the old transaction
	// still cannot read, a new one can.
	lease.Set(2, true)
	for name, read := range map[string]func() error{
		"Get": func() error { _, err := tx.Get(ctx, "t", []byte("x"), colA); return err },
		"GetRows": func() error {
			_, err := tx.GetRows(ctx, "t", [][]byte{[]byte("x")}, []Column{colA})
			return err
		},
		"Scan": func() error {
			for _, err := range tx.Scan(ctx, ScanOptions{Table: "t"}) {
				return err
			}
			return nil
		},
	} {
		if err := read(); !errors.Is(err, ErrSnapshotTooOld) {
			t.Errorf("%s in the old term: %v, want ErrSnapshotTooOld", name, err)
		}
	}
	if err := paused.View(ctx, func(ctx context.Context, tx *Txn) error {
		v, err := tx.Get(ctx, "t", []byte("y"), colA)
		if err != nil || string(v) != "y1" {
			t.Errorf("a new transaction reads y as %q %v", v, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
