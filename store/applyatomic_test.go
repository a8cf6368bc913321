package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// fakeClock is a HoldingClock that gives ts and records what happened.
type fakeClock struct {
	ts       uint64
	err      error
	holds    int
	released int
	// onRelease, if set, runs at release (e.g. to look at the store).
	onRelease func()
}

func (c *fakeClock) Hold(context.Context) (uint64, func(), error) {
	if c.err != nil {
		return 0, nil, c.err
	}
	c.holds++
	return c.ts, func() {
		c.released++
		if c.onRelease != nil {
			c.onRelease()
		}
	}, nil
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
	if clock.holds != 0 {
		t.Errorf("a timestamp was held (%d) though a check failed", clock.holds)
	}
	if after := dump(t, db); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("store changed:\n%q\nwas\n%q", after, before)
	}
}

// Rule: the held timestamp moves exactly the first rel[i] mutations of
// each row, and is released once the write is visible.
func TestApplyAtomicWritesAtHeldTimestamp(t *testing.T) {
	db := openMem(t, nil)
	clock := &fakeClock{ts: 100}
	var seenAtRelease []store.Cell
	clock.onRelease = func() { seenAtRelease = mustCollect(t, db, store.ScanRequest{Table: "t"}) }
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
	want := []store.Cell{
		{Row: []byte("a"), Column: col("data", "v"), Ts: 10, Value: []byte("a")},
		{Row: []byte("a"), Column: col("write", ""), Ts: 101, Value: []byte("wa")},
		{Row: []byte("c"), Column: col("data", "v"), Ts: 110, Value: []byte("c")},
		{Row: []byte("c"), Column: col("write", ""), Ts: 101, Value: []byte("wc")},
		{Row: []byte("n"), Column: col("note", ""), Ts: 5, Value: []byte("n")},
	}
	assertCells(t, mustCollect(t, db, store.ScanRequest{Table: "t"}), want)
	if clock.holds != 1 || clock.released != 1 {
		t.Fatalf("holds %d, releases %d", clock.holds, clock.released)
	}
	assertCells(t, seenAtRelease, want)
}

// Bad input is refused with an error naming it, and nothing is written;
// a held timestamp is released even then.
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
		if tc.clock.holds != tc.clock.released {
			t.Errorf("%s: %d holds, %d released", tc.name, tc.clock.holds, tc.clock.released)
		}
	}
	if _, _, err := db.ApplyAtomic(ctx, []*store.RowTxn{a}, []int{1}, nil); !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "clock") {
		t.Errorf("nil clock: %v, want errors.ErrUnsupported naming the clock", err)
	}
	if got := dump(t, db); len(got) != 0 {
		t.Fatalf("store written: %q", got)
	}
}

// A clock that cannot hold fails the call, which writes nothing.
func TestApplyAtomicClockFails(t *testing.T) {
	db := openMem(t, nil)
	_, _, err := db.ApplyAtomic(ctx, []*store.RowTxn{atomicPrewrite("a")}, []int{1}, &fakeClock{err: errors.ErrUnsupported})
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("ApplyAtomic with a failing clock: %v", err)
	}
	if got := dump(t, db); len(got) != 0 {
		t.Fatalf("store written: %q", got)
	}
}
