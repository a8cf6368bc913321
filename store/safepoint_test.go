package store_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
)

var spCell = store.SafePointCell{Table: "meta", Row: []byte("gc"), Column: col("gc", "sp")}

// writeSafePoint writes sp into the safe point's cell, as a collection
// persists it.
func writeSafePoint(t *testing.T, db store.Store, sp uint64) {
	t.Helper()
	res, err := db.Apply(ctx, &store.RowTxn{Table: spCell.Table, Row: spCell.Row,
		Mutations: []store.Mutation{{Column: spCell.Column, Value: binary.BigEndian.AppendUint64(nil, sp)}}})
	if err != nil || !res.Applied {
		t.Fatalf("writing the safe point: %+v %v", res, err)
	}
}

type fixedClock uint64

func (c fixedClock) Timestamp(context.Context) (uint64, error) { return uint64(c), nil }

// Rule: a row transaction whose Snapshot is below the safe point is
// refused, whole, before anything is written, by every write call; one at
// or above it, or without a Snapshot, runs. The safe point is the highest
// value written to its cell, and survives a reopen.
func TestSnapshotsBelowTheSafePointAreRefused(t *testing.T) {
	fs := vfs.NewMem()
	opts := memOptions(fs)
	opts.SafePoint = &spCell
	db, err := store.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	c := col("f", "q")
	write := func(row string, snapshot uint64) *store.RowTxn {
		return &store.RowTxn{Table: "t", Row: []byte(row), Snapshot: snapshot,
			Mutations: []store.Mutation{{Column: c, Ts: 1, Value: []byte("v")}}}
	}
	writeSafePoint(t, db, 100)
	for _, bad := range []store.Mutation{
		{Column: spCell.Column, Value: binary.BigEndian.AppendUint64(nil, 50)},
		{Column: spCell.Column, Delete: true},
		{Column: spCell.Column, Value: []byte("short")},
	} {
		_, err := db.Apply(ctx, &store.RowTxn{Table: spCell.Table, Row: spCell.Row, Mutations: []store.Mutation{bad}})
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("writing %+v to the safe point's cell: %v, want an invalid request", bad, err)
		}
	}
	if got := db.SafePoint(); got != 100 {
		t.Fatalf("safe point %d, want 100", got)
	}
	calls := map[string]func(txns ...*store.RowTxn) error{
		"Apply":    func(txns ...*store.RowTxn) error { _, err := db.Apply(ctx, txns[0]); return err },
		"ApplyAll": func(txns ...*store.RowTxn) error { _, err := db.ApplyAll(ctx, txns); return err },
		"ApplyAtomic": func(txns ...*store.RowTxn) error {
			_, _, err := db.ApplyAtomic(ctx, txns, make([]int, len(txns)), fixedClock(200))
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			n := 1
			if name != "Apply" {
				n = 2
			}
			below := []*store.RowTxn{write(name+"-below", 99), write(name+"-ok", 0)}[:n]
			err := call(below...)
			var se *store.SnapshotError
			if !errors.Is(err, store.ErrSnapshotTooOld) || !errors.As(err, &se) || se.Snapshot != 99 || se.SafePoint != 100 {
				t.Fatalf("%s below the safe point: %v", name, err)
			}
			if name == "ApplyAtomic" && !errors.Is(err, store.ErrNoTimestamp) {
				t.Errorf("ApplyAtomic's refusal does not say that nothing was written: %v", err)
			}
			for _, txn := range below {
				if cells, err := db.ReadRow(ctx, "t", txn.Row, []store.Column{c}, nil); err != nil || len(cells) != 0 {
					t.Fatalf("a refused call wrote %s: %v %v", txn.Row, cells, err)
				}
			}
			if err := call([]*store.RowTxn{write(name+"-at", 100), write(name+"-none", 0)}[:n]...); err != nil {
				t.Fatalf("%s at the safe point: %v", name, err)
			}
		})
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.SafePoint(); got != 100 {
		t.Fatalf("after a reopen the safe point is %d, want 100", got)
	}
	if _, err := db.Apply(ctx, write("again", 99)); !errors.Is(err, store.ErrSnapshotTooOld) {
		t.Fatalf("after a reopen: %v", err)
	}
}

// A store without a safe point cell refuses nothing.
func TestNoSafePointRefusesNothing(t *testing.T) {
	db := openMem(t, nil)
	writeSafePoint(t, db, 100)
	if db.SafePoint() != 0 {
		t.Fatal("a store without Options.SafePoint has a safe point")
	}
	res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("r"), Snapshot: 1,
		Mutations: []store.Mutation{{Column: col("f", "q"), Value: []byte("v")}}})
	if err != nil || !res.Applied {
		t.Fatal(res, err)
	}
}

func TestSafePointOptionValidated(t *testing.T) {
	opts := memOptions(vfs.NewMem())
	opts.SafePoint = &store.SafePointCell{Table: "meta", Column: col("gc", "sp")}
	if _, err := store.Open("db", opts); err == nil {
		t.Fatal("a safe point cell without a row was accepted")
	}
}
