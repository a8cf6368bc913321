package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// mustApply applies txn and fails the test unless it was applied.
func mustApply(t *testing.T, db store.Store, txn *store.RowTxn) {
	t.Helper()
	res, err := db.Apply(context.Background(), txn)
	if err != nil || !res.Applied {
		t.Fatalf("Apply %s/%q: %+v, %v", txn.Table, txn.Row, res, err)
	}
}

// cellsAt returns the versions of row's column c at exactly ts.
func cellsAt(t *testing.T, db store.Store, row string, c store.Column, ts uint64) int {
	t.Helper()
	cells, err := db.ReadRow(context.Background(), "t", []byte(row), []store.Column{c}, []store.Span{{MaxTs: ts, MinTs: ts}})
	if err != nil {
		t.Fatal(err)
	}
	return len(cells)
}

// A single delete removes a version like a delete, for every reader, and
// the version can be written and single-deleted again.
func TestSingleDeleteRemovesTheVersion(t *testing.T) {
	db := openMem(t, nil)
	c := col("f", "lock")
	for round := range 3 {
		put(t, db, "t", []byte("r"), c, 7, fmt.Sprint(round))
		if n := cellsAt(t, db, "r", c, 7); n != 1 {
			t.Fatalf("round %d: %d versions after the write", round, n)
		}
		mustApply(t, db, &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: c, Ts: 7, Delete: true, SingleDelete: true}}})
		if n := cellsAt(t, db, "r", c, 7); n != 0 {
			t.Fatalf("round %d: %d versions after the single delete", round, n)
		}
		if err := store.Flush(db); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.CompactAll(db); err != nil {
		t.Fatal(err)
	}
	if n := cellsAt(t, db, "r", c, 7); n != 0 {
		t.Fatalf("%d versions after compaction", n)
	}
}

func TestSingleDeleteWithoutDeleteIsInvalid(t *testing.T) {
	db := openMem(t, nil)
	_, err := db.Apply(context.Background(), &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: col("f", "q"), Ts: 1, SingleDelete: true}}})
	var ie *store.InvalidError
	if !errors.As(err, &ie) || ie.Field != "Mutations[0].SingleDelete" {
		t.Fatalf("err = %v, want an *InvalidError on Mutations[0].SingleDelete", err)
	}
}

// The point of a single delete: a version written and single-deleted
// within one memtable leaves nothing behind when the memtable is flushed,
// where a delete leaves a tombstone that every later read of the column
// steps over until compaction reaches the bottom level.
func TestSingleDeletedVersionsVanishAtFlush(t *testing.T) {
	for _, single := range []bool{false, true} {
		db, err := store.OpenWithoutCompactions("db", memOptions(vfs.NewMem()))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := store.Flush(db); err != nil { // the store's own metadata
			t.Fatal(err)
		}
		_, before := store.TableCount(db)
		c := col("f", "lock")
		for i := range 500 {
			row := []byte(fmt.Sprintf("row%04d", i))
			put(t, db, "t", row, c, 9, "held")
			mustApply(t, db, &store.RowTxn{Table: "t", Row: row, Mutations: []store.Mutation{{Column: c, Ts: 9, Delete: true, SingleDelete: single}}})
		}
		if err := store.Flush(db); err != nil {
			t.Fatal(err)
		}
		_, l0 := store.TableCount(db)
		l0 -= before
		switch {
		case single && l0 != 0:
			t.Errorf("single deletes: the flush wrote %d sstables, want none", l0)
		case !single && l0 == 0:
			t.Errorf("deletes: the flush wrote no sstable, want their tombstones")
		}
	}
}

// The protocol single-deletes only locks that were written exactly once:
// secondaries' locks. A primary's lock may be rewritten by a heartbeat,
// and a single delete of a twice-written version would bring the first
// write back once the two meet in a flush; this checks the primary's lock
// stays gone through flush and compaction, and a secondary's too.
func TestProtocolLocksStayDeletedThroughCompaction(t *testing.T) {
	db := openMem(t, nil)
	primary := protocol.Key{Table: "t", Row: []byte("p"), Column: col("f", "v")}
	secondary := protocol.Key{Table: "t", Row: []byte("s"), Column: col("f", "v")}
	const startTs, commitTs = 10, 20
	lock := func(k protocol.Key) *protocol.Lock {
		return &protocol.Lock{StartTs: startTs, Primary: primary, Op: protocol.OpPut, Inline: true, Value: []byte("x"), TTLMs: 1000}
	}
	mustApply(t, db, protocol.Prewrite(primary, lock(primary), nil))
	mustApply(t, db, protocol.Prewrite(secondary, lock(secondary), nil))
	if err := store.Flush(db); err != nil { // the first lock write goes down a level
		t.Fatal(err)
	}
	beat := lock(primary)
	beat.TTLMs = 5000
	mustApply(t, db, protocol.Heartbeat(primary, beat))
	w := &protocol.Write{StartTs: startTs, Op: protocol.OpPut, Inline: true, Value: []byte("x")}
	mustApply(t, db, protocol.CommitPrimary(primary, startTs, commitTs, w))
	mustApply(t, db, protocol.CommitSecondaryRowLocked([]protocol.CommitCell{{Key: secondary, Write: w}}, startTs, commitTs))
	for step, settle := range []func(*store.DB) error{store.Flush, store.CompactAll} {
		if err := settle(db); err != nil {
			t.Fatal(err)
		}
		for _, k := range []protocol.Key{primary, secondary} {
			if n := cellsAt(t, db, string(k.Row), k.Column, protocol.LockTs); n != 0 {
				t.Errorf("after step %d: the lock of %s is back", step, k)
			}
		}
	}
}
