package store_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/store"
)

func TestApplyChecks(t *testing.T) {
	db := openMem(t, nil)
	row := []byte("r")
	lock, data := col("lock", ""), col("data", "x")
	put(t, db, "t", row, lock, 10, "primary:a")
	put(t, db, "t", row, lock, 20, "secondary:b")
	put(t, db, "t", row, lock, 30, "primary:c")

	tests := []struct {
		name     string
		checks   []store.Check
		applied  bool
		failed   int
		conflict string // cellString of the expected conflict, "" for none
	}{
		{name: "no checks", applied: true, failed: -1},
		{name: "absent in empty range", applied: true, failed: -1,
			checks: []store.Check{{Column: lock, MinTs: 11, MaxTs: 19, Expect: store.MustBeAbsent}}},
		{name: "exist exact ts", applied: true, failed: -1,
			checks: []store.Check{{Column: lock, MinTs: 20, MaxTs: 20, Expect: store.MustExist}}},
		{name: "exist misses", failed: 0,
			checks: []store.Check{{Column: lock, MinTs: 21, MaxTs: 29, Expect: store.MustExist}}},
		{name: "absent fails with newest conflict", failed: 0, conflict: `"r"/lock:@30="primary:c"`,
			checks: []store.Check{{Column: lock, MaxTs: 100, Expect: store.MustBeAbsent}}},
		{name: "absent conflict honours MaxTs", failed: 0, conflict: `"r"/lock:@20="secondary:b"`,
			checks: []store.Check{{Column: lock, MaxTs: 29, Expect: store.MustBeAbsent}}},
		{name: "value prefix conflict is newest matching", failed: 0, conflict: `"r"/lock:@20="secondary:b"`,
			checks: []store.Check{{Column: lock, MaxTs: 100, ValuePrefix: []byte("sec"), Expect: store.MustBeAbsent}}},
		{name: "value prefix absent", applied: true, failed: -1,
			checks: []store.Check{{Column: lock, MaxTs: 100, ValuePrefix: []byte("tertiary"), Expect: store.MustBeAbsent}}},
		{name: "value prefix exists", applied: true, failed: -1,
			checks: []store.Check{{Column: lock, MinTs: 5, MaxTs: 25, ValuePrefix: []byte("primary:a"), Expect: store.MustExist}}},
		{name: "value prefix out of ts range", failed: 0,
			checks: []store.Check{{Column: lock, MinTs: 11, MaxTs: 25, ValuePrefix: []byte("primary"), Expect: store.MustExist}}},
		{name: "empty value prefix matches any", failed: 0, conflict: `"r"/lock:@30="primary:c"`,
			checks: []store.Check{{Column: lock, MaxTs: 100, ValuePrefix: []byte{}, Expect: store.MustBeAbsent}}},
		{name: "other column absent", applied: true, failed: -1,
			checks: []store.Check{{Column: col("lock", "q"), MaxTs: 100, Expect: store.MustBeAbsent}}},
		{name: "second check fails", failed: 1,
			checks: []store.Check{
				{Column: lock, MinTs: 10, MaxTs: 10, Expect: store.MustExist},
				{Column: data, MaxTs: 100, Expect: store.MustExist},
			}},
		{name: "first failure wins", failed: 0, conflict: `"r"/lock:@10="primary:a"`,
			checks: []store.Check{
				{Column: lock, MinTs: 10, MaxTs: 10, Expect: store.MustBeAbsent},
				{Column: data, MaxTs: 100, Expect: store.MustExist},
			}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := uint64(1000 + i)
			res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: row, Checks: tc.checks,
				Mutations: []store.Mutation{{Column: data, Ts: ts, Value: []byte("v")}}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Applied != tc.applied || res.FailedCheck != tc.failed {
				t.Fatalf("got applied=%v failed=%d, want %v %d", res.Applied, res.FailedCheck, tc.applied, tc.failed)
			}
			got := ""
			if res.Conflict != nil {
				got = cellString(*res.Conflict)
			}
			if got != tc.conflict {
				t.Fatalf("conflict %s, want %s", got, tc.conflict)
			}
			cells, err := db.ReadRow(ctx, "t", row, []store.Column{data}, []store.Span{{MinTs: ts, MaxTs: ts}})
			if err != nil {
				t.Fatal(err)
			}
			if written := len(cells) == 1; written != tc.applied {
				t.Fatalf("mutation written=%v, applied=%v", written, tc.applied)
			}
		})
	}
}

func TestApplyDeleteAndOverwrite(t *testing.T) {
	db := openMem(t, nil)
	row, c := []byte("r"), col("f", "q")
	put(t, db, "t", row, c, 1, "one")
	put(t, db, "t", row, c, 2, "two")
	put(t, db, "t", row, c, 2, "two again")
	if _, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: row,
		Mutations: []store.Mutation{{Column: c, Ts: 1, Delete: true}, {Column: c, Ts: 3, Value: []byte("three")}}}); err != nil {
		t.Fatal(err)
	}
	got, err := db.ReadRow(ctx, "t", row, []store.Column{c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertCells(t, got, []store.Cell{
		{Row: row, Column: c, Ts: 3, Value: []byte("three")},
		{Row: row, Column: c, Ts: 2, Value: []byte("two again")},
	})
}

// TestApplyConditionalMutation: a mutation with IfValuePrefix applies only
// to a version whose current value starts with the prefix, and otherwise is
// skipped without failing the rest of the row transaction.
func TestApplyConditionalMutation(t *testing.T) {
	db := openMem(t, nil)
	row, lock, other := []byte("r"), col("f", "lock"), col("f", "other")
	put(t, db, "t", row, lock, 0, "owner-B:details")
	// A owns nothing: its conditional delete is skipped, its plain put lands.
	res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: row, Mutations: []store.Mutation{
		{Column: lock, Ts: 0, Delete: true, IfValuePrefix: []byte("owner-A")},
		{Column: other, Ts: 5, Value: []byte("x")},
	}})
	if err != nil || !res.Applied {
		t.Fatalf("apply: %v %+v", err, res)
	}
	got, err := db.ReadRow(ctx, "t", row, []store.Column{lock, other}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertCells(t, got, []store.Cell{
		{Row: row, Column: lock, Ts: 0, Value: []byte("owner-B:details")},
		{Row: row, Column: other, Ts: 5, Value: []byte("x")},
	})
	// B's conditional delete applies; one on a missing version is skipped.
	res, err = db.Apply(ctx, &store.RowTxn{Table: "t", Row: row, Mutations: []store.Mutation{
		{Column: lock, Ts: 0, Delete: true, IfValuePrefix: []byte("owner-B")},
		{Column: other, Ts: 9, Delete: true, IfValuePrefix: []byte("")},
	}})
	if err != nil || !res.Applied {
		t.Fatalf("apply: %v %+v", err, res)
	}
	got, err = db.ReadRow(ctx, "t", row, []store.Column{lock, other}, nil)
	if err != nil {
		t.Fatal(err)
	}
	assertCells(t, got, []store.Cell{{Row: row, Column: other, Ts: 5, Value: []byte("x")}})
}

// TestApplyAcrossGroups commits a data cell and a notify cell in one txn and
// finds each in its own group.
func TestApplyAcrossGroups(t *testing.T) {
	db := openMem(t, nil)
	row := []byte("r")
	ntfy := col(sideFamily, "data:x")
	res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: row, Mutations: []store.Mutation{
		{Column: col("data", "x"), Ts: 5, Value: []byte("v")},
		{Column: ntfy, Ts: 5},
	}})
	if err != nil || !res.Applied {
		t.Fatal(res, err)
	}
	if got := mustCollect(t, db, store.ScanRequest{Table: "t"}); len(got) != 1 || got[0].Column.Family != "data" {
		t.Fatalf("default group scan: %q", cellsString(got))
	}
	if got := mustCollect(t, db, store.ScanRequest{Table: "t", Group: sideGroup}); len(got) != 1 || got[0].Column != ntfy {
		t.Fatalf("notify group scan: %q", cellsString(got))
	}
	// A check on the notify column from a txn that writes data.
	res, err = db.Apply(ctx, &store.RowTxn{Table: "t", Row: row,
		Checks:    []store.Check{{Column: ntfy, MaxTs: 10, Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{{Column: col("data", "x"), Ts: 6}}})
	if err != nil || res.Applied || res.Conflict == nil || res.Conflict.Column != ntfy {
		t.Fatalf("cross-group check: %+v %v", res, err)
	}
}

// TestApplyVersionRace has many goroutines race to claim each version of a
// column with check-absent-then-put; exactly one may win each version.
func TestApplyVersionRace(t *testing.T) {
	db := openMem(t, nil)
	const workers, versions = 8, 200
	c := col("f", "claim")
	winners := make([][]int, versions)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for v := range versions {
				res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("row"),
					Checks:    []store.Check{{Column: c, MinTs: uint64(v), MaxTs: uint64(v), Expect: store.MustBeAbsent}},
					Mutations: []store.Mutation{{Column: c, Ts: uint64(v), Value: []byte(strconv.Itoa(w))}},
					NoSync:    true})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Applied {
					mu.Lock()
					winners[v] = append(winners[v], w)
					mu.Unlock()
				} else if res.Conflict == nil || res.Conflict.Ts != uint64(v) {
					t.Errorf("lost version %d without its conflict: %+v", v, res)
				}
			}
		})
	}
	wg.Wait()
	for v, ws := range winners {
		if len(ws) != 1 {
			t.Fatalf("version %d has winners %v, want exactly one", v, ws)
		}
		got, err := db.ReadRow(ctx, "t", []byte("row"), []store.Column{c}, []store.Span{{MinTs: uint64(v), MaxTs: uint64(v)}})
		if err != nil || len(got) != 1 || string(got[0].Value) != strconv.Itoa(ws[0]) {
			t.Fatalf("version %d stored %q, winner %d (%v)", v, cellsString(got), ws[0], err)
		}
	}
}

// TestApplyCounter builds a read-modify-write counter from checks: each
// increment reads the newest version n@v and writes n+1@v+1 only if v is
// still the newest version. Lost updates would leave the count short.
func TestApplyCounter(t *testing.T) {
	db := openMem(t, nil)
	const workers, incs = 8, 50
	c := col("f", "n")
	row := []byte("counter")
	put(t, db, "t", row, c, 1, "0")
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for done := 0; done < incs; {
				cur, err := db.ReadRow(ctx, "t", row, []store.Column{c}, []store.Span{{MaxTs: ^uint64(0), Limit: 1}})
				if err != nil || len(cur) != 1 {
					t.Error(cur, err)
					return
				}
				n, _ := strconv.Atoi(string(cur[0].Value))
				v := cur[0].Ts
				res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: row,
					Checks:    []store.Check{{Column: c, MinTs: v + 1, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
					Mutations: []store.Mutation{{Column: c, Ts: v + 1, Value: []byte(strconv.Itoa(n + 1))}},
					NoSync:    true})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Applied {
					done++
				}
			}
		})
	}
	wg.Wait()
	cur, err := db.ReadRow(ctx, "t", row, []store.Column{c}, []store.Span{{MaxTs: ^uint64(0), Limit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(workers * incs); string(cur[0].Value) != want || cur[0].Ts != workers*incs+1 {
		t.Fatalf("counter = %q@%d, want %s@%d", cur[0].Value, cur[0].Ts, want, workers*incs+1)
	}
}

// TestApplySameRowWaitsForLatch holds a row's latch inside Apply (via the
// after-checks hook) and verifies a second Apply on the same row waits for
// the latch and does not evaluate its checks until the first one finished.
func TestApplySameRowWaitsForLatch(t *testing.T) {
	db := openMem(t, nil)
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // runs before openMem's Close, which waits for Apply
	var holding atomic.Bool
	var overlap atomic.Bool
	store.SetAfterChecksHook(db, func(txn *store.RowTxn) {
		if string(txn.Mutations[0].Value) == "first" {
			holding.Store(true)
			close(entered)
			<-release
			holding.Store(false)
			return
		}
		if holding.Load() {
			overlap.Store(true)
		}
	})
	row, c := []byte("r"), col("f", "q")
	txn := func(v string) *store.RowTxn {
		return &store.RowTxn{Table: "t", Row: row,
			Checks:    []store.Check{{Column: c, MinTs: 1, MaxTs: 1, Expect: store.MustBeAbsent}},
			Mutations: []store.Mutation{{Column: c, Ts: 1, Value: []byte(v)}}}
	}
	waits := latchWaits(db)
	first := make(chan store.RowResult, 1)
	go func() {
		res, _ := db.Apply(ctx, txn("first"))
		first <- res
	}()
	recv(t, entered, "the first Apply reaching its checks")
	second := make(chan store.RowResult, 1)
	go func() {
		res, _ := db.Apply(ctx, txn("second"))
		second <- res
	}()
	select {
	case x := <-waits:
		if want := store.LatchIndex(db, "t", row); x != want {
			t.Fatalf("waited for stripe %d, want %d", x, want)
		}
	case <-second:
		t.Fatal("second Apply on the same row finished while the first held the latch")
	case <-time.After(hangGuard):
		t.Fatal("second Apply neither waited for the latch nor finished")
	}
	unblock()
	if res := recv(t, first, "the first Apply finishing"); !res.Applied {
		t.Fatalf("first: %+v", res)
	}
	if res := recv(t, second, "the second Apply finishing"); res.Applied || res.FailedCheck != 0 {
		t.Fatalf("second should see the first's write and fail its check: %+v", res)
	}
	if overlap.Load() {
		t.Fatal("second Apply evaluated its checks while the first held the latch")
	}
}

// TestApplyDifferentRowsParallel blocks an Apply inside its latch and
// requires an Apply on another row (another latch stripe) to complete
// meanwhile. A store-wide lock would deadlock here until the timeout.
func TestApplyDifferentRowsParallel(t *testing.T) {
	db := openMem(t, nil)
	rowA := []byte("a")
	var rowB []byte
	for i := 0; ; i++ {
		rowB = []byte(fmt.Sprintf("b%d", i))
		if store.LatchIndex(db, "t", rowB) != store.LatchIndex(db, "t", rowA) {
			break
		}
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // runs before openMem's Close, which waits for Apply
	store.SetAfterChecksHook(db, func(txn *store.RowTxn) {
		if string(txn.Row) == "a" {
			close(entered)
			<-release
		}
	})
	doneA := make(chan error)
	go func() {
		_, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: rowA,
			Mutations: []store.Mutation{{Column: col("f", "q"), Ts: 1}}})
		doneA <- err
	}()
	<-entered
	doneB := make(chan error)
	go func() {
		_, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: rowB,
			Mutations: []store.Mutation{{Column: col("f", "q"), Ts: 1}}})
		doneB <- err
	}()
	select {
	case err := <-doneB:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Apply on another row blocked behind a held row latch")
	}
	unblock()
	if err := <-doneA; err != nil {
		t.Fatal(err)
	}
}

func TestApplyContextCanceled(t *testing.T) {
	db := openMem(t, nil)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := db.Apply(cctx, &store.RowTxn{Table: "t", Row: []byte("r"),
		Mutations: []store.Mutation{{Column: col("f", "q"), Ts: 1}}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// The checks of a prewrite mostly look for columns that do not exist yet.
// Once the row's data is compacted into the last level, such a check must
// be answered by that level's bloom filter, not by reading its data: pebble
// skips last-level filters unless asked, and without them every prewrite
// check read a data block (20 % of the web index's CPU).
func TestChecksOfAbsentColumnsUseLastLevelFilters(t *testing.T) {
	db := openMem(t, nil)
	ctx := context.Background()
	for i := range 200 {
		put(t, db, "t", []byte(fmt.Sprintf("row%03d", i)), col("f", "old"), 5, "v")
	}
	if err := store.CompactAll(db); err != nil {
		t.Fatal(err)
	}
	if total, l0 := store.TableCount(db); total == 0 || l0 != 0 {
		t.Fatalf("%d sstables, %d in L0: want all below L0", total, l0)
	}
	before := store.FilterExclusions(db)
	const checks = 50
	for i := range checks {
		row := []byte(fmt.Sprintf("row%03d", 2*i))
		c := col("f", fmt.Sprintf("new%d", i))
		res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: row,
			Checks:    []store.Check{{Column: c, MinTs: 0, MaxTs: 100, Expect: store.MustBeAbsent}},
			Mutations: []store.Mutation{{Column: c, Ts: 10, Value: []byte("x")}}})
		if err != nil || !res.Applied {
			t.Fatalf("Apply: %+v, %v", res, err)
		}
	}
	if got := store.FilterExclusions(db) - before; got < checks {
		t.Fatalf("bloom filters excluded an sstable %d times for %d checks of absent columns, want at least %d", got, checks, checks)
	}
}
