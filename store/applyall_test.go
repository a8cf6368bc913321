package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
)

// hangGuard bounds a wait that ends only if the code under test works: a
// safety net that turns a hang (a deadlock) into a failure naming what
// hung, far above the time the awaited work takes on a loaded machine.
// Tests assert what happened, never how long it took.
const hangGuard = 30 * time.Second

// recv receives from ch; if nothing comes within hangGuard, the test fails
// saying that what never happened.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("%s: not within %v", what, hangGuard)
		var zero T
		return zero
	}
}

// Names of the differential test. Tables and rows hold the bytes a naive
// key of table and row joined by a separator would confuse: ("t\x00",
// "\x00") and ("t", "\x00\x00") are different rows.
var (
	diffTables = []string{"t", "t\x00", "u\xff"}
	diffRows   = [][]byte{[]byte("a"), {0}, {0, 0}, []byte("a\x00"), []byte("b"), {0xff}}
	diffFams   = []string{"f", "g", sideFamily}
	diffQuals  = []string{"", "q", "\x00"}
)

func randomColumn(rng *rand.Rand) store.Column {
	return col(diffFams[rng.IntN(len(diffFams))], diffQuals[rng.IntN(len(diffQuals))])
}

// randomTxn builds a row transaction on (table, row) with checks of both
// presences (exact versions, ranges, open ranges, value prefixes, and
// chains of checks on one column as a prewrite has) and mutations
// (writes, deletes, conditional ones).
func randomTxn(rng *rand.Rand, table string, row []byte) *store.RowTxn {
	txn := &store.RowTxn{Table: table, Row: row, NoSync: rng.IntN(2) == 0}
	for range rng.IntN(4) {
		c := store.Check{Column: randomColumn(rng), Expect: store.Presence(rng.IntN(2))}
		switch rng.IntN(3) {
		case 0:
			c.MinTs = uint64(1 + rng.IntN(30))
			c.MaxTs = c.MinTs
		case 1:
			c.MaxTs = uint64(rng.IntN(32))
			c.MinTs = uint64(rng.IntN(int(c.MaxTs) + 1))
		default:
			c.MinTs, c.MaxTs = uint64(rng.IntN(32)), ^uint64(0)
		}
		if rng.IntN(3) == 0 {
			c.ValuePrefix = []byte{byte('a' + rng.IntN(3))}
		}
		txn.Checks = append(txn.Checks, c)
		if c.MinTs > 0 && rng.IntN(3) == 0 {
			// A check of older versions of the same column, which shares
			// the previous check's seek.
			older := store.Check{Column: c.Column, MaxTs: c.MinTs - 1, Expect: store.Presence(rng.IntN(2))}
			older.MinTs = uint64(rng.IntN(int(older.MaxTs) + 1))
			txn.Checks = append(txn.Checks, older)
		}
	}
	for range rng.IntN(5) {
		m := store.Mutation{Column: randomColumn(rng), Ts: uint64(1 + rng.IntN(30))}
		switch rng.IntN(6) {
		case 0:
			m.Delete = true
		case 1:
			m.Delete = true
			m.IfValuePrefix = []byte{byte('a' + rng.IntN(3))}
		case 2:
			m.IfValuePrefix = []byte{byte('a' + rng.IntN(3))}
			fallthrough
		default:
			m.Value = []byte{byte('a' + rng.IntN(3)), byte(rng.IntN(256))}
		}
		txn.Mutations = append(txn.Mutations, m)
	}
	return txn
}

func resultString(r store.RowResult) string {
	s := fmt.Sprintf("applied=%v failed=%d", r.Applied, r.FailedCheck)
	if r.Conflict != nil {
		s += " conflict=" + cellString(*r.Conflict)
	}
	return s
}

// dump returns every cell of db, of every table in both groups.
func dump(t *testing.T, db *store.DB) []string {
	t.Helper()
	var out []string
	for _, group := range []string{store.DefaultGroup, sideGroup} {
		tables, err := db.Tables(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		for _, table := range tables {
			for _, c := range mustCollect(t, db, store.ScanRequest{Table: table, Group: group}) {
				out = append(out, fmt.Sprintf("%s/%q/%s", group, table, cellString(c)))
			}
		}
	}
	return out
}

func assertSameContents(t *testing.T, what string, a, b *store.DB) {
	t.Helper()
	da, db := dump(t, a), dump(t, b)
	if !slices.Equal(da, db) {
		t.Fatalf("%s: contents differ\nApplyAll: %q\n   Apply: %q", what, da, db)
	}
}

// TestApplyAllDifferential applies random batches of row transactions on
// distinct rows with ApplyAll to one store and with Apply, one by one in
// the same order, to another: every result and, in the end, every cell
// must be the same.
func TestApplyAllDifferential(t *testing.T) {
	all, one := openMem(t, nil), openMem(t, nil)
	type rowRef struct {
		table string
		row   []byte
	}
	var refs []rowRef
	for _, table := range diffTables {
		for _, row := range diffRows {
			refs = append(refs, rowRef{table, row})
		}
	}
	rng := rand.New(rand.NewPCG(7, 11))
	var applied, failed, failedThenApplied int
	for batch := range 400 {
		rng.Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
		txns := make([]*store.RowTxn, 1+rng.IntN(12))
		for i := range txns {
			txns[i] = randomTxn(rng, refs[i].table, refs[i].row)
		}
		got, err := all.ApplyAll(ctx, txns)
		if err != nil {
			t.Fatalf("batch %d: ApplyAll: %v", batch, err)
		}
		if len(got) != len(txns) {
			t.Fatalf("batch %d: %d results for %d row transactions", batch, len(got), len(txns))
		}
		sawFailure := false
		for i, txn := range txns {
			want, err := one.Apply(ctx, txn)
			if err != nil {
				t.Fatalf("batch %d: Apply(txns[%d]): %v", batch, i, err)
			}
			if g, w := resultString(got[i]), resultString(want); g != w {
				t.Fatalf("batch %d: txns[%d] (%+v): ApplyAll %s, Apply %s", batch, i, txn, g, w)
			}
			if want.Applied {
				applied++
				if sawFailure {
					failedThenApplied++
				}
			} else {
				failed++
				sawFailure = true
			}
		}
		if batch%100 == 50 {
			// Later checks then read sstables as well as the memtable.
			if err := store.Flush(all); err != nil {
				t.Fatal(err)
			}
		}
		if batch%50 == 0 {
			assertSameContents(t, fmt.Sprintf("after batch %d", batch), all, one)
		}
	}
	assertSameContents(t, "in the end", all, one)
	t.Logf("%d row transactions applied, %d failed a check, %d applied after a failure in their batch", applied, failed, failedThenApplied)
	if applied == 0 || failed == 0 || failedThenApplied == 0 {
		t.Fatalf("the random batches did not exercise both outcomes: %d applied, %d failed, %d applied after a failure", applied, failed, failedThenApplied)
	}
}

// TestApplyAllFailedCheckStopsNothingElse: the middle row transaction
// fails its check; the others are applied, and the failed one writes
// nothing.
func TestApplyAllFailedCheckStopsNothingElse(t *testing.T) {
	db := openMem(t, nil)
	lock, data := col("lock", ""), col("data", "v")
	put(t, db, "t", []byte("b"), lock, 7, "other")
	prewrite := func(row string) *store.RowTxn {
		return &store.RowTxn{Table: "t", Row: []byte(row),
			Checks:    []store.Check{{Column: lock, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
			Mutations: []store.Mutation{{Column: lock, Ts: 10, Value: []byte("mine")}, {Column: data, Ts: 10, Value: []byte(row)}}}
	}
	res, err := db.ApplyAll(ctx, []*store.RowTxn{prewrite("a"), prewrite("b"), prewrite("c")})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"applied=true failed=-1", `applied=false failed=0 conflict="b"/lock:@7="other"`, "applied=true failed=-1"}
	for i := range want {
		if got := resultString(res[i]); got != want[i] {
			t.Errorf("result %d: %s, want %s", i, got, want[i])
		}
	}
	got := mustCollect(t, db, store.ScanRequest{Table: "t"})
	assertCells(t, got, []store.Cell{
		{Row: []byte("a"), Column: data, Ts: 10, Value: []byte("a")},
		{Row: []byte("a"), Column: lock, Ts: 10, Value: []byte("mine")},
		{Row: []byte("b"), Column: lock, Ts: 7, Value: []byte("other")},
		{Row: []byte("c"), Column: data, Ts: 10, Value: []byte("c")},
		{Row: []byte("c"), Column: lock, Ts: 10, Value: []byte("mine")},
	})
}

// TestApplyAllRowsWithSeparatorBytes: rows of different tables whose
// table and row bytes concatenate alike are different rows, not
// duplicates.
func TestApplyAllRowsWithSeparatorBytes(t *testing.T) {
	db := openMem(t, nil)
	c := col("f", "q")
	txns := []*store.RowTxn{
		{Table: "t\x00", Row: []byte{0}, Mutations: []store.Mutation{{Column: c, Ts: 1, Value: []byte("t0/0")}}},
		{Table: "t", Row: []byte{0, 0}, Mutations: []store.Mutation{{Column: c, Ts: 1, Value: []byte("t/00")}}},
		{Table: "t", Row: []byte{0}, Mutations: []store.Mutation{{Column: c, Ts: 1, Value: []byte("t/0")}}},
	}
	res, err := db.ApplyAll(ctx, txns)
	if err != nil {
		t.Fatalf("ApplyAll of three different rows: %v", err)
	}
	for i, r := range res {
		if !r.Applied {
			t.Fatalf("txns[%d]: %s", i, resultString(r))
		}
	}
	for _, txn := range txns {
		got, err := db.ReadRow(ctx, txn.Table, txn.Row, []store.Column{c}, nil)
		if err != nil || len(got) != 1 || !bytes.Equal(got[0].Value, txn.Mutations[0].Value) {
			t.Fatalf("%q/%q: %q %v, want %q", txn.Table, txn.Row, cellsString(got), err, txn.Mutations[0].Value)
		}
	}
}

// TestApplyAllInvalid: a malformed call fails as a whole with an
// *InvalidError naming the offending row transaction and field, and
// writes nothing, not even the valid row transactions before it.
func TestApplyAllInvalid(t *testing.T) {
	db := openMem(t, nil)
	ok := col("f", "q")
	good := func(row string) *store.RowTxn {
		return &store.RowTxn{Table: "t", Row: []byte(row), Mutations: []store.Mutation{{Column: ok, Ts: 1, Value: []byte("v")}}}
	}
	bad := func(row string, change func(*store.RowTxn)) *store.RowTxn {
		txn := good(row)
		change(txn)
		return txn
	}
	tooMany := make([]*store.RowTxn, store.MaxApplyAll+1)
	for i := range tooMany {
		tooMany[i] = good(strconv.Itoa(i))
	}
	tests := []struct {
		name, field, reason string
		txns                []*store.RowTxn
	}{
		{"duplicate row", "txns[2]", "the same row as txns[0]", []*store.RowTxn{good("a"), good("b"), good("a")}},
		{"duplicate row in the side group", "txns[1]", "the same row as txns[0]", []*store.RowTxn{good("a"),
			bad("a", func(txn *store.RowTxn) { txn.Mutations[0].Column = col(sideFamily, "") })}},
		{"nil", "txns[1]", "nil", []*store.RowTxn{good("a"), nil, good("b")}},
		{"nil before an earlier invalid one", "txns[2]", "nil", []*store.RowTxn{good("a"),
			bad("b", func(txn *store.RowTxn) { txn.Table = "" }), nil}},
		{"check presence", "txns[2].Checks[0].Expect", "unknown presence 7", []*store.RowTxn{good("a"), good("b"),
			bad("c", func(txn *store.RowTxn) { txn.Checks = []store.Check{{Column: ok, MaxTs: 1, Expect: 7}} })}},
		{"check range", "txns[2].Checks[1]", "MinTs 5 > MaxTs 4", []*store.RowTxn{good("a"), good("b"),
			bad("c", func(txn *store.RowTxn) {
				txn.Checks = []store.Check{{Column: ok, MaxTs: 1}, {Column: ok, MinTs: 5, MaxTs: 4}}
			})}},
		{"check family", "txns[0].Checks[0].Column", "empty family", []*store.RowTxn{
			bad("a", func(txn *store.RowTxn) { txn.Checks = []store.Check{{MaxTs: 1}} })}},
		{"table", "txns[1].Table", "empty table name", []*store.RowTxn{good("a"), bad("b", func(txn *store.RowTxn) { txn.Table = "" })}},
		{"row", "txns[1].Row", "empty row", []*store.RowTxn{good("a"), bad("b", func(txn *store.RowTxn) { txn.Row = nil })}},
		{"mutation family", "txns[1].Mutations[1].Column", "empty family", []*store.RowTxn{good("a"),
			bad("b", func(txn *store.RowTxn) { txn.Mutations = append(txn.Mutations, store.Mutation{Ts: 2}) })}},
		{"invalid after a duplicate", "txns[1]", "the same row as txns[0]", []*store.RowTxn{good("a"), good("a"),
			bad("c", func(txn *store.RowTxn) { txn.Row = nil })}},
		{"too many", "txns", fmt.Sprintf("%d row transactions, more than MaxApplyAll (%d)", store.MaxApplyAll+1, store.MaxApplyAll), tooMany},
	}
	for _, tc := range tests {
		res, err := db.ApplyAll(ctx, tc.txns)
		var ie *store.InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v (results %v), want an *InvalidError", tc.name, err, res)
			continue
		}
		if ie.Op != "ApplyAll" || ie.Field != tc.field || ie.Reason != tc.reason {
			t.Errorf("%s: op %q field %q reason %q, want ApplyAll %q %q", tc.name, ie.Op, ie.Field, ie.Reason, tc.field, tc.reason)
		}
		if res != nil {
			t.Errorf("%s: results %v with the error", tc.name, res)
		}
		if msg := err.Error(); !strings.Contains(msg, tc.field) || !strings.Contains(msg, "ApplyAll") {
			t.Errorf("%s: message %q does not name ApplyAll and %s", tc.name, msg, tc.field)
		}
	}
	for _, group := range []string{store.DefaultGroup, sideGroup} {
		if tables, err := db.Tables(ctx, group); err != nil || len(tables) != 0 {
			t.Fatalf("invalid calls wrote tables %q in group %s (%v)", tables, group, err)
		}
	}

	// No row transactions: no results, no error.
	for _, txns := range [][]*store.RowTxn{nil, {}} {
		if res, err := db.ApplyAll(ctx, txns); res != nil || err != nil {
			t.Errorf("ApplyAll(%#v) = %v, %v; want nil, nil", txns, res, err)
		}
	}
	// The most a call may carry is fine.
	res, err := db.ApplyAll(ctx, tooMany[:store.MaxApplyAll])
	if err != nil || len(res) != store.MaxApplyAll {
		t.Fatalf("ApplyAll of MaxApplyAll row transactions: %d results, %v", len(res), err)
	}
	for i, r := range res {
		if !r.Applied {
			t.Fatalf("txns[%d]: %s", i, resultString(r))
		}
	}
}

// TestApplyAllCounters: goroutines increment counters in several rows
// with read-check-write row transactions, some with ApplyAll over
// overlapping sets of rows in different orders, some with Apply. Lost
// increments would leave a counter short of the increments applied; a
// latch order that depends on the request could deadlock.
func TestApplyAllCounters(t *testing.T) {
	// Not openMem: after a deadlock, Close would wait forever for the
	// stuck calls.
	db, err := store.Open("db", memOptions(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	const nrows, allWorkers, oneWorkers, rounds = 6, 4, 2, 200
	type counter struct {
		row  []byte
		col  store.Column
		incs atomic.Int64
	}
	counters := make([]*counter, nrows)
	for i := range counters {
		c := &counter{row: fmt.Appendf(nil, "counter%d", i), col: col("f", "n")}
		if i%2 == 1 {
			c.col = col(sideFamily, "n")
		}
		put(t, db, "t", c.row, c.col, 1, "0")
		counters[i] = c
	}
	// increment returns the row transaction that makes c one more than it
	// is now, if nobody else increments it first.
	increment := func(c *counter) (*store.RowTxn, error) {
		cur, err := db.ReadRow(ctx, "t", c.row, []store.Column{c.col}, []store.Span{{MaxTs: ^uint64(0), Limit: 1}})
		if err != nil || len(cur) != 1 {
			return nil, fmt.Errorf("reading %s: %v %v", c.row, cellsString(cur), err)
		}
		n, err := strconv.Atoi(string(cur[0].Value))
		if err != nil {
			return nil, err
		}
		v := cur[0].Ts
		return &store.RowTxn{Table: "t", Row: c.row, NoSync: true,
			Checks:    []store.Check{{Column: c.col, MinTs: v + 1, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
			Mutations: []store.Mutation{{Column: c.col, Ts: v + 1, Value: []byte(strconv.Itoa(n + 1))}}}, nil
	}
	var wg sync.WaitGroup
	for w := range allWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for range rounds {
				set := rng.Perm(nrows)[:2+rng.IntN(nrows-1)]
				txns := make([]*store.RowTxn, len(set))
				for i, ci := range set {
					var err error
					if txns[i], err = increment(counters[ci]); err != nil {
						t.Error(err)
						return
					}
				}
				res, err := db.ApplyAll(ctx, txns)
				if err != nil {
					t.Errorf("ApplyAll: %v", err)
					return
				}
				for i, r := range res {
					if r.Applied {
						counters[set[i]].incs.Add(1)
					}
				}
			}
		})
	}
	for w := range oneWorkers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			for range rounds {
				c := counters[rng.IntN(nrows)]
				txn, err := increment(c)
				if err != nil {
					t.Error(err)
					return
				}
				res, err := db.Apply(ctx, txn)
				if err != nil {
					t.Errorf("Apply: %v", err)
					return
				}
				if res.Applied {
					c.incs.Add(1)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(hangGuard):
		buf := make([]byte, 1<<20)
		t.Fatalf("the workers are still running after %v: deadlocked?\n%s", hangGuard, buf[:runtime.Stack(buf, true)])
	}
	total := int64(0)
	for _, c := range counters {
		cur, err := db.ReadRow(ctx, "t", c.row, []store.Column{c.col}, []store.Span{{MaxTs: ^uint64(0), Limit: 1}})
		if err != nil || len(cur) != 1 {
			t.Fatal(cur, err)
		}
		n := c.incs.Load()
		if want := strconv.FormatInt(n, 10); string(cur[0].Value) != want || cur[0].Ts != uint64(n)+1 {
			t.Errorf("%s = %q@%d after %d applied increments, want %s@%d", c.row, cur[0].Value, cur[0].Ts, n, want, n+1)
		}
		total += n
	}
	if total == 0 {
		t.Fatal("no increment was applied")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// distinctStripeRows returns n rows of table "t" whose latches are all on
// different stripes, so that holding one says nothing about the others.
func distinctStripeRows(db *store.DB, n int) [][]byte {
	var rows [][]byte
	stripes := map[int]bool{}
	for i := 0; len(rows) < n; i++ {
		row := []byte(fmt.Sprintf("r%d", i))
		if x := store.LatchIndex(db, "t", row); !stripes[x] {
			stripes[x] = true
			rows = append(rows, row)
		}
	}
	return rows
}

// claim is a row transaction that writes value at version 1 of f:q if no
// version 1 is there yet.
func claim(row []byte, value string) *store.RowTxn {
	c := col("f", "q")
	return &store.RowTxn{Table: "t", Row: row,
		Checks:    []store.Check{{Column: c, MinTs: 1, MaxTs: 1, Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{{Column: c, Ts: 1, Value: []byte(value)}}}
}

// latchWaits makes db report on the returned channel each latch stripe a
// row transaction is about to wait for.
func latchWaits(db *store.DB) <-chan int {
	waits := make(chan int, 64)
	store.SetLatchWaitHook(db, func(stripe int) {
		select {
		case waits <- stripe:
		default:
		}
	})
	return waits
}

// TestApplyAllHoldsEveryLatch: ApplyAll holds the latches of all its rows
// from before its first check until its commit. While it is stopped in the
// checks of its first row transaction, every row's latch is held, and an
// Apply on its last row waits for the latch instead of running; released,
// that Apply sees ApplyAll's write.
func TestApplyAllHoldsEveryLatch(t *testing.T) {
	db := openMem(t, nil)
	rows := distinctStripeRows(db, 3)
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before openMem's Close, which waits for ApplyAll
	var mu sync.Mutex
	var unheld []string
	store.SetAfterChecksHook(db, func(txn *store.RowTxn) {
		if string(txn.Mutations[0].Value) != "all" {
			return
		}
		for _, row := range rows {
			if !store.LatchHeld(db, "t", row) {
				mu.Lock()
				unheld = append(unheld, fmt.Sprintf("%s during the checks of %s", row, txn.Row))
				mu.Unlock()
			}
		}
		if bytes.Equal(txn.Row, rows[0]) {
			close(entered)
			<-release
		}
	})
	waits := latchWaits(db)
	type outcome struct {
		res []store.RowResult
		err error
	}
	allDone := make(chan outcome, 1)
	go func() {
		res, err := db.ApplyAll(ctx, []*store.RowTxn{claim(rows[0], "all"), claim(rows[1], "all"), claim(rows[2], "all")})
		allDone <- outcome{res, err}
	}()
	recv(t, entered, "ApplyAll reaching the checks of its first row")
	oneDone := make(chan outcome, 1)
	go func() {
		res, err := db.Apply(ctx, claim(rows[2], "one"))
		oneDone <- outcome{[]store.RowResult{res}, err}
	}()
	select {
	case x := <-waits:
		if want := store.LatchIndex(db, "t", rows[2]); x != want {
			t.Fatalf("a caller waited for stripe %d, want %d (the Apply's row)", x, want)
		}
	case o := <-oneDone:
		unblock()
		t.Fatalf("Apply on a row of a running ApplyAll did not wait for its latch: %v %v", o.res, o.err)
	case <-time.After(hangGuard):
		t.Fatal("Apply on a row of a running ApplyAll neither waited for the latch nor finished")
	}
	unblock()
	all := recv(t, allDone, "ApplyAll finishing")
	if all.err != nil || len(all.res) != 3 {
		t.Fatalf("ApplyAll: %v %v", all.res, all.err)
	}
	for i, r := range all.res {
		if !r.Applied {
			t.Errorf("ApplyAll txns[%d]: %s", i, resultString(r))
		}
	}
	one := recv(t, oneDone, "Apply finishing")
	if one.err != nil || one.res[0].Applied || one.res[0].Conflict == nil || string(one.res[0].Conflict.Value) != "all" {
		t.Errorf("Apply after ApplyAll released its row: %s %v, want a failed check on ApplyAll's write", resultString(one.res[0]), one.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(unheld) > 0 {
		t.Errorf("latches not held: %s", strings.Join(unheld, ", "))
	}
}

// TestApplyAllWaitsForHeldLatch: ApplyAll evaluates no check while an
// Apply holds the latch of one of its rows, and its row transactions then
// see that Apply's write.
func TestApplyAllWaitsForHeldLatch(t *testing.T) {
	db := openMem(t, nil)
	rows := distinctStripeRows(db, 3)
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	var early atomic.Bool // ApplyAll checked a row while the Apply held its latch
	var holding atomic.Bool
	store.SetAfterChecksHook(db, func(txn *store.RowTxn) {
		if string(txn.Mutations[0].Value) == "one" {
			holding.Store(true)
			close(entered)
			<-release
			holding.Store(false)
			return
		}
		if holding.Load() {
			early.Store(true)
		}
	})
	waits := latchWaits(db)
	oneDone := make(chan error, 1)
	go func() { _, err := db.Apply(ctx, claim(rows[1], "one")); oneDone <- err }()
	recv(t, entered, "Apply reaching its checks")
	type outcome struct {
		res []store.RowResult
		err error
	}
	allDone := make(chan outcome, 1)
	go func() {
		res, err := db.ApplyAll(ctx, []*store.RowTxn{claim(rows[0], "all"), claim(rows[1], "all"), claim(rows[2], "all")})
		allDone <- outcome{res, err}
	}()
	select {
	case x := <-waits:
		if want := store.LatchIndex(db, "t", rows[1]); x != want {
			t.Fatalf("a caller waited for stripe %d, want %d (the Apply's row)", x, want)
		}
	case o := <-allDone:
		unblock()
		t.Fatalf("ApplyAll did not wait for the latch an Apply holds: %v %v", o.res, o.err)
	case <-time.After(hangGuard):
		t.Fatal("ApplyAll neither waited for the held latch nor finished")
	}
	unblock()
	if err := recv(t, oneDone, "Apply finishing"); err != nil {
		t.Fatal(err)
	}
	all := recv(t, allDone, "ApplyAll finishing")
	if all.err != nil {
		t.Fatal(all.err)
	}
	want := []string{"applied=true failed=-1", fmt.Sprintf(`applied=false failed=0 conflict=%q/f:q@1="one"`, rows[1]), "applied=true failed=-1"}
	for i := range want {
		if got := resultString(all.res[i]); got != want[i] {
			t.Errorf("ApplyAll txns[%d]: %s, want %s", i, got, want[i])
		}
	}
	if early.Load() {
		t.Error("ApplyAll evaluated checks while an Apply held one of its rows' latches")
	}
}

// TestApplyAllSyncAndBatches: ApplyAll commits one pebble batch whatever
// the number of row transactions, synced if and only if an applied one
// asks for it (and the store syncs at all), and none when nothing is to be
// written; Apply commits one batch per row transaction.
func TestApplyAllSyncAndBatches(t *testing.T) {
	opts := memOptions(vfs.NewMem())
	opts.Durability = store.DurabilitySynced
	db := openMem(t, opts)
	var mu sync.Mutex
	var commits []bool
	hook := func(sync bool) {
		mu.Lock()
		commits = append(commits, sync)
		mu.Unlock()
	}
	store.SetCommitHook(db, hook)
	take := func() []bool {
		mu.Lock()
		defer mu.Unlock()
		c := commits
		commits = nil
		return c
	}
	lock, data := col("lock", ""), col("data", "v")
	// prewrites returns n prewrite-like row transactions on rows
	// prefix0..prefix<n-1>; those listed in synced have NoSync false.
	prewrites := func(prefix string, n int, synced ...int) []*store.RowTxn {
		txns := make([]*store.RowTxn, n)
		for i := range txns {
			txns[i] = &store.RowTxn{Table: "t", Row: fmt.Appendf(nil, "%s%d", prefix, i), NoSync: !slices.Contains(synced, i),
				Checks:    []store.Check{{Column: lock, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
				Mutations: []store.Mutation{{Column: lock, Ts: 5, Value: []byte("primary")}, {Column: data, Ts: 5, Value: []byte("x")}}}
		}
		return txns
	}
	applyAll := func(what string, txns []*store.RowTxn, wantApplied int, wantCommits []bool) {
		t.Helper()
		res, err := db.ApplyAll(ctx, txns)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		applied := 0
		for _, r := range res {
			if r.Applied {
				applied++
			}
		}
		if applied != wantApplied {
			t.Errorf("%s: %d row transactions applied, want %d", what, applied, wantApplied)
		}
		if got := take(); !slices.Equal(got, wantCommits) {
			t.Errorf("%s: commits (synced?) %v, want %v", what, got, wantCommits)
		}
	}
	applyAll("64 without sync", prewrites("a", 64), 64, []bool{false})
	applyAll("64, one synced", prewrites("b", 64, 37), 64, []bool{true})
	every := make([]int, 64)
	for i := range every {
		every[i] = i
	}
	applyAll("64, all synced", prewrites("c", 64, every...), 64, []bool{true})
	applyAll("one synced", prewrites("d", 1, 0), 1, []bool{true})
	applyAll("every check fails", prewrites("a", 64, 3), 0, nil)

	// The only synced row transaction fails its check: nothing it asked
	// for is written, so nothing needs syncing.
	txns := prewrites("e", 8, 5)
	txns[5].Row = []byte("a5") // locked above
	applyAll("the synced one fails", txns, 7, []bool{false})

	// Applied, but the only mutation is conditional on a value that is
	// not there: nothing to commit.
	applyAll("nothing to write", []*store.RowTxn{{Table: "t", Row: []byte("f"),
		Mutations: []store.Mutation{{Column: lock, Ts: 5, Delete: true, IfValuePrefix: []byte("x")}}}}, 1, nil)

	// Apply commits once per row transaction, synced unless NoSync.
	for i, noSync := range []bool{false, true, false} {
		if res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: fmt.Appendf(nil, "g%d", i), NoSync: noSync,
			Mutations: []store.Mutation{{Column: data, Ts: 1}}}); err != nil || !res.Applied {
			t.Fatalf("Apply: %s %v", resultString(res), err)
		}
	}
	if got := take(); !slices.Equal(got, []bool{true, false, true}) {
		t.Errorf("three Apply calls: commits (synced?) %v, want [true false true]", got)
	}

	// A store that never syncs does not sync ApplyAll either.
	none := openMem(t, nil)
	store.SetCommitHook(none, hook)
	if _, err := none.ApplyAll(ctx, prewrites("a", 4, 0, 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	if got := take(); !slices.Equal(got, []bool{false}) {
		t.Errorf("ApplyAll on a store with DurabilityNone: commits (synced?) %v, want [false]", got)
	}
}

// TestApplyAllContext: a context ended before the call, or while the call
// waits for a latch, ends the call with the context's error and nothing
// written.
func TestApplyAllContext(t *testing.T) {
	db := openMem(t, nil)
	rows := distinctStripeRows(db, 3)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	res, err := db.ApplyAll(cctx, []*store.RowTxn{claim(rows[0], "all"), claim(rows[1], "all")})
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("ApplyAll with a canceled context: %v, %v; want context.Canceled", res, err)
	}
	if got := dump(t, db); len(got) != 0 {
		t.Fatalf("a canceled ApplyAll wrote %q", got)
	}

	// Canceled while waiting for the latch an Apply holds.
	entered, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	store.SetAfterChecksHook(db, func(txn *store.RowTxn) {
		if string(txn.Mutations[0].Value) == "one" {
			close(entered)
			<-release
		}
	})
	waits := latchWaits(db)
	oneDone := make(chan error, 1)
	go func() { _, err := db.Apply(ctx, claim(rows[1], "one")); oneDone <- err }()
	recv(t, entered, "Apply reaching its checks")
	cctx, cancel = context.WithCancel(ctx)
	defer cancel()
	allDone := make(chan error, 1)
	go func() {
		_, err := db.ApplyAll(cctx, []*store.RowTxn{claim(rows[0], "all"), claim(rows[1], "all"), claim(rows[2], "all")})
		allDone <- err
	}()
	if x := recv(t, waits, "ApplyAll waiting for the held latch"); x != store.LatchIndex(db, "t", rows[1]) {
		t.Fatalf("waited for stripe %d, want the Apply's row's", x)
	}
	cancel()
	unblock()
	if err := recv(t, oneDone, "Apply finishing"); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, allDone, "ApplyAll finishing"); !errors.Is(err, context.Canceled) {
		t.Fatalf("ApplyAll canceled while waiting for a latch: %v, want context.Canceled", err)
	}
	want := []string{fmt.Sprintf(`default/"t"/%q/f:q@1="one"`, rows[1])}
	if got := dump(t, db); !slices.Equal(got, want) {
		t.Fatalf("after the canceled ApplyAll: %q, want only the Apply's write %q", got, want)
	}
}

func TestApplyAllClosed(t *testing.T) {
	db, err := store.Open("db", memOptions(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ApplyAll(ctx, []*store.RowTxn{claim([]byte("r"), "v")}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("ApplyAll on a closed store: %v, want store.ErrClosed", err)
	}
}
