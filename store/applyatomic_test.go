package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/store"
)

// fakeClock is a Clock that gives ts and counts its draws; during, if
// set, runs in the draw, while the rows are pending.
type fakeClock struct {
	ts     uint64
	err    error
	draws  int
	during func()
}

func (c *fakeClock) Timestamp(context.Context) (uint64, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.draws++
	if c.during != nil {
		c.during()
	}
	return c.ts, nil
}

// atomicPrewrite is a row transaction that fails if the row is locked and
// otherwise writes a commit record at the held timestamp plus 1 (relative)
// and a data cell at 10 (absolute).
func atomicPrewrite(row string) *store.RowTxn {
	lock, write, data := col("lock", ""), col("write", ""), col("data", "v")
	return &store.RowTxn{Table: "t", Row: []byte(row),
		Checks: []store.Check{{Column: lock, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{
			{Column: write, Ts: 1, Value: []byte("w" + row)},
			{Column: data, Ts: 10, Value: []byte(row)},
		}}
}

// Rule: all or none. One failed check leaves every row as it was and
// draws no timestamp.
func TestApplyAtomicAllOrNone(t *testing.T) {
	db := openMem(t, nil)
	put(t, db, "t", []byte("b"), col("lock", ""), 7, "other")
	before := dump(t, db)
	clock := &fakeClock{ts: 100}
	ts, res, err := db.ApplyAtomic(ctx, []*store.RowTxn{atomicPrewrite("a"), atomicPrewrite("b"), atomicPrewrite("c")}, []int{1, 1, 1}, clock)
	if err != nil || ts != 0 {
		t.Fatalf("ApplyAtomic = %d, %v", ts, err)
	}
	want := []string{"applied=false failed=-1", `applied=false failed=0 conflict="b"/lock:@7="other"`, "applied=false failed=-1"}
	for i := range want {
		if got := resultString(res[i]); got != want[i] {
			t.Errorf("result %d: %s, want %s", i, got, want[i])
		}
	}
	if clock.draws != 0 {
		t.Errorf("a timestamp was drawn (%d) though a check failed", clock.draws)
	}
	if after := dump(t, db); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("store changed:\n%q\nwas\n%q", after, before)
	}
}

// Rule: the drawn timestamp moves exactly the first rel[i] mutations of
// each row.
func TestApplyAtomicWritesAtTheDrawnTimestamp(t *testing.T) {
	db := openMem(t, nil)
	clock := &fakeClock{ts: 100}
	other := &store.RowTxn{Table: "t", Row: []byte("n"), Mutations: []store.Mutation{{Column: col("note", ""), Ts: 5, Value: []byte("n")}}}
	ts, res, err := db.ApplyAtomic(ctx, []*store.RowTxn{atomicPrewrite("a"), other, atomicPrewrite("c")}, []int{1, 0, 2}, clock)
	if err != nil || ts != 100 {
		t.Fatalf("ApplyAtomic = %d, %v", ts, err)
	}
	for i, r := range res {
		if !r.Applied {
			t.Errorf("result %d: %s", i, resultString(r))
		}
	}
	assertCells(t, mustCollect(t, db, store.ScanRequest{Table: "t"}), []store.Cell{
		{Row: []byte("a"), Column: col("data", "v"), Ts: 10, Value: []byte("a")},
		{Row: []byte("a"), Column: col("write", ""), Ts: 101, Value: []byte("wa")},
		{Row: []byte("c"), Column: col("data", "v"), Ts: 110, Value: []byte("c")},
		{Row: []byte("c"), Column: col("write", ""), Ts: 101, Value: []byte("wc")},
		{Row: []byte("n"), Column: col("note", ""), Ts: 5, Value: []byte("n")},
	})
	if clock.draws != 1 {
		t.Fatalf("%d draws", clock.draws)
	}
}

// Rule: from before its timestamp is drawn until its write is visible, an
// atomic write's rows are pending, and every read of them waits: a reader
// that starts while the timestamp is drawn (whose own snapshot would be
// later) finds the write, by ReadRow, ReadRows or a Scan whose range
// holds a row the write creates. Reads of other rows do not wait.
func TestReadsWaitForPendingAtomicWrites(t *testing.T) {
	db := openMem(t, nil)
	put(t, db, "t", []byte("z"), col("data", "v"), 1, "z")
	reads := map[string]func() (int, error){
		"ReadRow": func() (int, error) {
			cells, err := db.ReadRow(ctx, "t", []byte("a"), []store.Column{col("write", "")}, nil)
			return len(cells), err
		},
		"ReadRows": func() (int, error) {
			res, err := db.ReadRows(ctx, []store.RowRead{{Table: "t", Row: []byte("z"), Columns: []store.Column{col("data", "v")}}, {Table: "t", Row: []byte("a"), Columns: []store.Column{col("write", "")}}})
			if err != nil {
				return 0, err
			}
			return len(res[1]), nil
		},
		"Scan": func() (int, error) {
			cells, err := collect(t, db.Scan(ctx, store.ScanRequest{Table: "t", Start: []byte("a"), End: []byte("b"), Filter: store.ColumnFilter{Families: []string{"write"}}}))
			return len(cells), err
		},
	}
	for name, read := range reads {
		row := "a"
		clock := &fakeClock{ts: 100}
		seen := make(chan int, 1)
		clock.during = func() {
			// A read of another row goes through at once.
			other := make(chan error, 1)
			go func() {
				_, err := db.ReadRow(ctx, "t", []byte("z"), []store.Column{col("data", "v")}, nil)
				other <- err
			}()
			if err := recv(t, other, name+": a read of a row that is not pending"); err != nil {
				t.Error(err)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				n, err := read()
				if err != nil {
					t.Error(err)
				}
				seen <- n
			}()
			// Give a read that does not wait every chance to read first.
			select {
			case <-done:
			case <-time.After(50 * time.Millisecond):
			}
		}
		if _, _, err := db.ApplyAtomic(ctx, []*store.RowTxn{atomicPrewrite(row)}, []int{1}, clock); err != nil {
			t.Fatal(err)
		}
		if n := recv(t, seen, name); n != 1 {
			t.Errorf("%s started while the write was pending found %d write records, want 1", name, n)
		}
		// Undo for the next read.
		if _, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte(row), Mutations: []store.Mutation{
			{Column: col("write", ""), Ts: 101, Delete: true}, {Column: col("data", "v"), Ts: 10, Delete: true}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// Bad input is refused with an error naming it, and nothing is written.
func TestApplyAtomicInvalid(t *testing.T) {
	db := openMem(t, nil)
	a := atomicPrewrite("a")
	for _, tc := range []struct {
		name  string
		txns  []*store.RowTxn
		rel   []int
		clock *fakeClock
		field string
	}{
		{"short rel", []*store.RowTxn{a}, nil, &fakeClock{ts: 1}, "rel"},
		{"rel past mutations", []*store.RowTxn{a}, []int{3}, &fakeClock{ts: 1}, "rel[0]"},
		{"negative rel", []*store.RowTxn{a}, []int{-1}, &fakeClock{ts: 1}, "rel[0]"},
		{"nil txn", []*store.RowTxn{nil}, []int{0}, &fakeClock{ts: 1}, "txns[0]"},
		{"overflow", []*store.RowTxn{a}, []int{1}, &fakeClock{ts: ^uint64(0)}, "txns[0].Mutations[0].Ts"},
	} {
		_, _, err := db.ApplyAtomic(ctx, tc.txns, tc.rel, tc.clock)
		var ie *store.InvalidError
		if !errors.As(err, &ie) || ie.Field != tc.field || ie.Op != "ApplyAtomic" {
			t.Errorf("%s: %v, want an InvalidError on %s", tc.name, err, tc.field)
		}
	}
	if _, _, err := db.ApplyAtomic(ctx, []*store.RowTxn{a}, []int{1}, nil); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "clock") {
		t.Errorf("nil clock: %v, want errors.ErrUnsupported naming the clock", err)
	}
	if got := dump(t, db); len(got) != 0 {
		t.Fatalf("store written: %q", got)
	}
}

// A clock that fails fails the call, which writes nothing, with its error
// and ErrNoTimestamp.
func TestApplyAtomicClockFails(t *testing.T) {
	db := openMem(t, nil)
	down := errors.New("oracle down")
	_, _, err := db.ApplyAtomic(ctx, []*store.RowTxn{atomicPrewrite("a")}, []int{1}, &fakeClock{err: down})
	if !errors.Is(err, down) || !errors.Is(err, store.ErrNoTimestamp) {
		t.Fatalf("ApplyAtomic with a failing clock: %v, want the clock's error and store.ErrNoTimestamp", err)
	}
	if got := dump(t, db); len(got) != 0 {
		t.Fatalf("store written: %q", got)
	}
}

// A read waits only for the writes pending when it checked: a write that
// becomes pending later draws a later timestamp than the reader's
// snapshot, and waiting for it too would let a stream of writes hold a
// scan of a busy table for ever.
func TestReadsDoNotWaitForLaterPendingWrites(t *testing.T) {
	db := openMem(t, nil)
	found := make(chan int, 1)
	store.SetPendingFoundHook(db, func(n int) { found <- n })
	// pend starts an ApplyAtomic of row that draws its timestamp only
	// once release is closed, and returns once the row is pending.
	pend := func(row string, release chan struct{}) <-chan error {
		pending, done := make(chan struct{}), make(chan error, 1)
		clock := &fakeClock{ts: 100, during: func() { close(pending); <-release }}
		go func() {
			_, _, err := db.ApplyAtomic(ctx, []*store.RowTxn{atomicPrewrite(row)}, []int{1}, clock)
			done <- err
		}()
		recv(t, pending, row+" pending")
		return done
	}
	releaseA, releaseB := make(chan struct{}), make(chan struct{})
	doneA := pend("a", releaseA)
	scanned := make(chan int, 1)
	go func() {
		cells, err := collect(t, db.Scan(ctx, store.ScanRequest{Table: "t"}))
		if err != nil {
			t.Error(err)
		}
		scanned <- len(cells)
	}()
	if n := recv(t, found, "the scan's check"); n != 1 {
		t.Fatalf("the scan found %d pending writes, want 1", n)
	}
	doneB := pend("b", releaseB)
	close(releaseA)
	if err := recv(t, doneA, "write a"); err != nil {
		t.Fatal(err)
	}
	if n := recv(t, scanned, "the scan, with a later write still pending"); n != 2 {
		t.Fatalf("the scan read %d cells, want row a's 2", n)
	}
	close(releaseB)
	if err := recv(t, doneB, "write b"); err != nil {
		t.Fatal(err)
	}
}

// A call whose context ends before the timestamp is drawn writes nothing
// and says so (ErrNoTimestamp), so that a committer does not report an
// unknown outcome.
func TestApplyAtomicCanceledBeforeTheTimestamp(t *testing.T) {
	db := openMem(t, nil)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	clock := &fakeClock{ts: 100}
	_, _, err := db.ApplyAtomic(cctx, []*store.RowTxn{atomicPrewrite("a")}, []int{1}, clock)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, store.ErrNoTimestamp) {
		t.Fatalf("ApplyAtomic with its context canceled: %v, want context.Canceled and store.ErrNoTimestamp", err)
	}
	if clock.draws != 0 {
		t.Fatalf("%d timestamps drawn", clock.draws)
	}
	if got := dump(t, db); len(got) != 0 {
		t.Fatalf("store written: %q", got)
	}
}
