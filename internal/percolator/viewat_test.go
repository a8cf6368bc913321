package percolator

import (
	"context"
	"errors"
	"testing"
)

// put commits value to t/r colA.
func put(t *testing.T, db *DB, value string) {
	t.Helper()
	if err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
		return tx.Set("t", []byte("r"), colA, []byte(value))
	}); err != nil {
		t.Fatal(err)
	}
}

// readAt reads t/r colA as of ts.
func readAt(db *DB, ts uint64) (string, error) {
	var v []byte
	err := db.ViewAt(context.Background(), ts, func(ctx context.Context, tx *Txn) error {
		var err error
		v, err = tx.Get(ctx, "t", []byte("r"), colA)
		return err
	})
	return string(v), err
}

// ViewAt reads the store as it was at a past timestamp: every version
// committed at or before it, none after.
func TestViewAtReadsAPastSnapshot(t *testing.T) {
	e := newEnv(t)
	db := e.db(t, "w", nil)
	ctx := context.Background()
	first, err := e.or.Timestamp(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var marks []uint64
	for _, v := range []string{"one", "two", "three"} {
		put(t, db, v)
		ts, err := e.or.Timestamp(ctx)
		if err != nil {
			t.Fatal(err)
		}
		marks = append(marks, ts)
	}
	for i, want := range []string{"one", "two", "three"} {
		got, err := readAt(db, marks[i])
		if err != nil || got != want {
			t.Errorf("as of mark %d: %q, %v; want %q", i, got, err, want)
		}
	}
	if _, err := readAt(db, first); !errors.Is(err, ErrNotFound) {
		t.Errorf("before the first write: %v, want ErrNotFound", err)
	}
	err = db.ViewAt(ctx, marks[2], func(ctx context.Context, tx *Txn) error {
		return tx.Set("t", []byte("r"), colA, []byte("x"))
	})
	if !errors.Is(err, ErrReadOnly) {
		t.Errorf("a write in ViewAt: %v, want ErrReadOnly", err)
	}
}

// A timestamp the oracle has not handed out is refused: commits below it
// may still come.
func TestViewAtRefusesTheFuture(t *testing.T) {
	e := newEnv(t)
	db := e.db(t, "w", nil)
	ts, err := e.or.Timestamp(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAt(db, ts+1<<30); !errors.Is(err, ErrFutureSnapshot) {
		t.Fatalf("far ahead of the oracle: %v, want ErrFutureSnapshot", err)
	}
	if _, err := readAt(db, 0); !errors.Is(err, ErrSnapshotTooOld) {
		t.Fatalf("timestamp 0: %v, want ErrSnapshotTooOld", err)
	}
}

// Below the safe point a past snapshot is refused, whichever process
// collected: this DB's own collection, or another's that persisted a
// safe point this DB has not seen yet.
func TestViewAtRefusesSnapshotsACollectionPassed(t *testing.T) {
	e := newEnv(t)
	reader, collector := e.db(t, "reader", nil), e.db(t, "collector", nil)
	put(t, collector, "old")
	before, err := e.or.Timestamp(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	put(t, collector, "new")
	collectNow(t, e, collector)
	if reader.SafePoint() >= before {
		t.Fatal("the reader knows the safe point already; the test proves nothing")
	}
	ran := false
	err = reader.ViewAt(context.Background(), before, func(context.Context, *Txn) error { ran = true; return nil })
	if ran || !errors.Is(err, ErrSnapshotTooOld) {
		t.Fatalf("below another process's safe point: ran %v, %v; want ErrSnapshotTooOld before running", ran, err)
	}
	if _, err := readAt(collector, before); !errors.Is(err, ErrSnapshotTooOld) {
		t.Fatalf("below its own safe point: %v, want ErrSnapshotTooOld", err)
	}
	if got, err := readAt(reader, collector.SafePoint()); err != nil || got != "new" {
		t.Fatalf("at the safe point: %q, %v", got, err)
	}
}

// A collection elsewhere that passes the snapshot while the view reads
// makes the view fail, even though each read succeeded: what it read may
// be incomplete.
func TestViewAtFailsWhenACollectionPassesItMeanwhile(t *testing.T) {
	e := newEnv(t)
	reader, collector := e.db(t, "reader", nil), e.db(t, "collector", nil)
	put(t, collector, "old")
	at, err := e.or.Timestamp(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	put(t, collector, "new")
	ran := false
	err = reader.ViewAt(context.Background(), at, func(ctx context.Context, tx *Txn) error {
		ran = true
		if _, err := tx.Get(ctx, "t", []byte("r"), colA); err != nil {
			return err
		}
		collectNow(t, e, collector) // another process: it does not see this view
		return nil
	})
	if !ran || !errors.Is(err, ErrSnapshotTooOld) {
		t.Fatalf("ran %v, err %v; want the view to run and fail with ErrSnapshotTooOld", ran, err)
	}
}

// A collection in the view's own process does not pass it: the view is
// registered among its running transactions.
func TestViewAtHoldsBackItsOwnProcesssCollection(t *testing.T) {
	e := newEnv(t)
	db := e.db(t, "w", nil)
	put(t, db, "old")
	at, err := e.or.Timestamp(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, "new")
	var got []byte
	err = db.ViewAt(context.Background(), at, func(ctx context.Context, tx *Txn) error {
		st := collectNow(t, e, db)
		if st.SafePoint > at {
			t.Errorf("safe point %d passed the running view at %d", st.SafePoint, at)
		}
		got, err = tx.Get(ctx, "t", []byte("r"), colA)
		return err
	})
	if err != nil || string(got) != "old" {
		t.Fatalf("read %q, %v; want old", got, err)
	}
}
