package remote

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
)

// A row transaction's Snapshot reaches the served store, and the store's
// refusal of one below its safe point comes back as the local store's
// error: a *store.SnapshotError matching store.ErrSnapshotTooOld (and, for
// ApplyAtomic, store.ErrNoTimestamp: nothing was written), from every
// write call, ApplyNow included.
func TestSnapshotBelowTheSafePointRefusedOverNATS(t *testing.T) {
	ctx := context.Background()
	cell := store.SafePointCell{Table: "meta", Row: []byte("gc"), Column: col("gc", "sp")}
	db, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Logger: quiet, Durability: store.DurabilityNone, SafePoint: &cell})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, _, client := serveClient(t, startNATS(t), db, &ServiceOptions{Oracle: &fixedOracle{ts: 500}}, nil)
	if _, err := client.Apply(ctx, &store.RowTxn{Table: cell.Table, Row: cell.Row,
		Mutations: []store.Mutation{{Column: cell.Column, Value: binary.BigEndian.AppendUint64(nil, 100)}}}); err != nil {
		t.Fatal(err)
	}
	txn := func(snapshot uint64) *store.RowTxn {
		return &store.RowTxn{Table: "t", Row: []byte("r"), Snapshot: snapshot, NoSync: true,
			Mutations: []store.Mutation{{Column: col("f", "q"), Value: []byte("v")}}}
	}
	calls := map[string]func(*store.RowTxn) error{
		"Apply":    func(t *store.RowTxn) error { _, err := client.Apply(ctx, t); return err },
		"ApplyAll": func(t *store.RowTxn) error { _, err := client.ApplyAll(ctx, []*store.RowTxn{t}); return err },
		"ApplyNow": func(t *store.RowTxn) error { _, _, err := client.ApplyNow(ctx, t, 0); return err },
		"ApplyAtomic": func(t *store.RowTxn) error {
			_, _, err := client.ApplyAtomic(ctx, []*store.RowTxn{t}, []int{0}, nil)
			return err
		},
	}
	for name, call := range calls {
		err := call(txn(99))
		var se *store.SnapshotError
		if !errors.As(err, &se) || se.Snapshot != 99 || se.SafePoint != 100 || !errors.Is(err, store.ErrSnapshotTooOld) {
			t.Errorf("%s below the safe point: %v", name, err)
		}
		if got := errors.Is(err, store.ErrNoTimestamp); got != (name == "ApplyAtomic") {
			t.Errorf("%s's refusal matches ErrNoTimestamp: %v (%v)", name, got, err)
		}
		if err := call(txn(100)); err != nil {
			t.Errorf("%s at the safe point: %v", name, err)
		}
	}
	if cells, err := db.ReadRow(ctx, "t", []byte("r"), []store.Column{col("f", "q")}, nil); err != nil || len(cells) != 1 {
		t.Fatalf("what the accepted calls wrote: %v %v", cells, err)
	}
}
