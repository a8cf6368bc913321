package store_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
)

// Ingested cells read back exactly as if Apply had written them, in every
// locality group, beside cells written before, and after a reopen.
func TestIngestReadsBackLikeApply(t *testing.T) {
	fs := vfs.NewMem()
	db, err := store.Open("db", memOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, "t", []byte("r1"), col("f", "a"), 5, "applied")
	var txns []*store.RowTxn
	for i := range 300 {
		row := []byte(fmt.Sprintf("r%d\x00x", i%37)) // rows repeat across txns; separator bytes in rows
		txns = append(txns, &store.RowTxn{Table: "t", Row: row, Mutations: []store.Mutation{
			{Column: col("f", fmt.Sprintf("q%d", i)), Ts: 9, Value: []byte(fmt.Sprint("v", i))},
			{Column: col(sideFamily, fmt.Sprintf("q%d", i)), Ts: 9, Value: []byte(fmt.Sprint("s", i))},
		}})
	}
	txns = append(txns, &store.RowTxn{Table: "t", Row: []byte("r1"), Mutations: []store.Mutation{{Column: col("f", "a"), Ts: 7, Value: []byte("ingested")}}})
	if err := db.Ingest(ctx, txns); err != nil {
		t.Fatal(err)
	}
	check := func(db *store.DB) {
		t.Helper()
		cells, err := db.ReadRow(ctx, "t", []byte("r1"), []store.Column{col("f", "a")}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(cells) != 2 || cells[0].Ts != 7 || string(cells[0].Value) != "ingested" || cells[1].Ts != 5 || string(cells[1].Value) != "applied" {
			t.Fatalf("r1 f:a = %+v, want the ingested version 7 above the applied version 5", cells)
		}
		for _, g := range []string{"", sideGroup} {
			n := 0
			for c, err := range db.Scan(ctx, store.ScanRequest{Table: "t", Group: g}) {
				if err != nil {
					t.Fatal(err)
				}
				if c.Ts == 9 {
					want := "v"
					if g == sideGroup {
						want = "s"
					}
					if string(c.Value) != want+c.Column.Qualifier[1:] {
						t.Fatalf("group %q: %q %s = %q", g, c.Row, c.Column, c.Value)
					}
					n++
				}
			}
			if n != 300 {
				t.Fatalf("group %q: %d ingested cells, want 300", g, n)
			}
		}
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = store.Open("db", memOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(db)
	noFilesLeft(t, fs)
}

// A bad request names what is wrong and writes nothing, not even its good
// parts.
func TestIngestInvalid(t *testing.T) {
	db := openMem(t, nil)
	good := store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: col("f", "q"), Ts: 1, Value: []byte("v")}}}
	for _, tc := range []struct {
		name  string
		txns  []*store.RowTxn
		field string
	}{
		{"nil", []*store.RowTxn{&good, nil}, "txns[1]"},
		{"check", []*store.RowTxn{&good, {Table: "t", Row: []byte("x"), Checks: []store.Check{{Column: col("f", "q")}}}}, "txns[1].Checks"},
		{"delete", []*store.RowTxn{&good, {Table: "t", Row: []byte("x"), Mutations: []store.Mutation{{Column: col("f", "q"), Delete: true}}}}, "txns[1].Mutations[0].Delete"},
		{"single delete flag", []*store.RowTxn{&good, {Table: "t", Row: []byte("x"), Mutations: []store.Mutation{{Column: col("f", "q"), SingleDelete: true}}}}, "txns[1].Mutations[0].SingleDelete"},
		{"conditional", []*store.RowTxn{&good, {Table: "t", Row: []byte("x"), Mutations: []store.Mutation{{Column: col("f", "q"), IfValuePrefix: []byte{}}}}}, "txns[1].Mutations[0].IfValuePrefix"},
		{"no family", []*store.RowTxn{&good, {Table: "t", Row: []byte("x"), Mutations: []store.Mutation{{Column: col("", "q")}}}}, "txns[1].Mutations[0].Column"},
		{"no row", []*store.RowTxn{&good, {Table: "t"}}, "txns[1].Row"},
		{"twice", []*store.RowTxn{&good, &good}, "txns"},
	} {
		err := db.Ingest(ctx, tc.txns)
		var ie *store.InvalidError
		if !errors.As(err, &ie) || ie.Field != tc.field || !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want an InvalidError on %s", tc.name, err, tc.field)
		}
	}
	cells, err := db.ReadRow(ctx, "t", []byte("r"), []store.Column{col("f", "q")}, nil)
	if err != nil || len(cells) != 0 {
		t.Fatalf("after refused ingests: %v %v", cells, err)
	}
	if err := db.Ingest(ctx, nil); err != nil {
		t.Fatalf("empty ingest: %v", err)
	}
}

// Every value stays next to its key, in flushed, compacted and ingested
// sstables alike: the version a transaction reads last (the data record
// its write record points at) is always an older version of its column,
// which pebble would otherwise move into a value block (one more block
// read for each).
func TestValuesStayNextToTheirKeys(t *testing.T) {
	db := openMem(t, nil)
	long := strings.Repeat("value ", 40)
	for i := range 100 {
		row := []byte(fmt.Sprintf("row%03d", i))
		for ts := uint64(1); ts <= 3; ts++ {
			put(t, db, "t", row, col("f", "v"), ts, long)
		}
	}
	if err := store.CompactAll(db); err != nil {
		t.Fatal(err)
	}
	var txns []*store.RowTxn
	for i := range 100 {
		txns = append(txns, &store.RowTxn{Table: "u", Row: []byte(fmt.Sprintf("row%03d", i)), Mutations: []store.Mutation{
			{Column: col("f", "v"), Ts: 2, Value: []byte(long)},
			{Column: col("f", "v"), Ts: 1, Value: []byte(long)},
		}})
	}
	if err := db.Ingest(context.Background(), txns); err != nil {
		t.Fatal(err)
	}
	if total, _ := store.TableCount(db); total < 2 {
		t.Fatalf("%d sstables, want the compacted ones and the ingested ones", total)
	}
	n, err := store.ValuesInValueBlocks(db)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d values in value blocks, want none", n)
	}
}

// Ingests of disjoint row ranges, each after the one before, go to the
// LSM's last level as they are, with nothing left to compact, even when
// each writes rows of two tables in two locality groups: the reason an
// import passes each table's rows in order and ends its chunks between
// rows. An ingest that overlaps data already there goes above it, to be
// compacted later.
func TestIngestOfDisjointRangesGoesToTheLastLevel(t *testing.T) {
	db, err := store.OpenWithoutCompactions("db", memOptions(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ingest := func(lo, hi int, ts uint64) {
		t.Helper()
		var txns []*store.RowTxn
		for i := lo; i < hi; i++ {
			for _, table := range []string{"t", "u"} {
				txns = append(txns, &store.RowTxn{Table: table, Row: []byte(fmt.Sprintf("r%06d", i)), Mutations: []store.Mutation{
					{Column: col("f", "a"), Ts: ts, Value: []byte("v")},
					{Column: col(sideFamily, "b"), Ts: ts, Value: []byte("s")},
				}})
			}
		}
		if err := db.Ingest(ctx, txns); err != nil {
			t.Fatal(err)
		}
	}
	// where reports the sstables in the last level and in all.
	where := func() (last, total int64) {
		lv := store.LevelTables(db)
		for _, n := range lv {
			total += n
		}
		return lv[len(lv)-1], total
	}
	for i := range 3 {
		ingest(i*1000, (i+1)*1000, 9)
	}
	if last, total := where(); total < 12 || last != total {
		t.Fatalf("%d of %d sstables in the last level after three disjoint ingests, want all (at least 12)", last, total)
	}
	ingest(500, 1500, 11)
	if last, total := where(); last == total {
		t.Fatalf("all %d sstables in the last level after an overlapping ingest: the check above cannot fail", total)
	}
}

// A large ingest in key order is written as it is encoded, a range of the
// request per core; anything else is encoded whole and sorted. Whatever
// order the request is in (sorted, reversed, sorted halves swapped, rows
// split over two row transactions), every cell reads back, the files land
// in the last level without overlapping, and a version written twice is
// refused, with nothing written.
func TestIngestLargeInAnyOrder(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const rows, perRow = 3000, 8 // 24k cells: several workers
	build := func(table string) []*store.RowTxn {
		txns := make([]*store.RowTxn, rows)
		for i := range txns {
			// A zero byte in some rows and qualifiers: escaped, longer
			// than the arena's estimate.
			row := fmt.Appendf(nil, "r%05d", i)
			if i%100 == 0 {
				row = append(row, 0, 'z')
			}
			txn := &store.RowTxn{Table: table, Row: row}
			for q := range perRow {
				qual := fmt.Sprintf("q%d", q)
				if i%50 == 0 {
					qual += "\x00"
				}
				txn.Mutations = append(txn.Mutations, store.Mutation{Column: col("f", qual), Ts: 3, Value: fmt.Appendf(nil, "%s/%d", row, q)})
			}
			txns[i] = txn
		}
		return txns
	}
	fs := vfs.NewMem()
	db, err := store.OpenWithoutCompactions("db", memOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reversed := build("b")
	slices.Reverse(reversed)
	for _, txn := range reversed {
		slices.Reverse(txn.Mutations)
	}
	swapped := build("c")
	swapped = append(swapped[rows/2:], swapped[:rows/2]...)
	// Each row in two adjacent row transactions, the later columns
	// first, as an import passes a row that spans two of its blocks.
	var split []*store.RowTxn
	for _, txn := range build("e") {
		head, tail := *txn, *txn
		head.Mutations, tail.Mutations = txn.Mutations[perRow/2:], txn.Mutations[:perRow/2]
		split = append(split, &head, &tail)
	}
	sorted := 0
	store.SetSortedIngestHook(db, func() { sorted++ })
	for _, tc := range []struct {
		table   string
		txns    []*store.RowTxn
		inOrder bool
	}{{"a", build("a"), true}, {"b", reversed, false}, {"c", swapped, false}, {"e", split, true}} {
		table := tc.table
		sorted = 0
		if err := db.Ingest(ctx, tc.txns); err != nil {
			t.Fatalf("table %s: %v", table, err)
		}
		if tc.inOrder != (sorted == 0) {
			t.Errorf("table %s: sorted before writing %d times, want it written in order: %v", table, sorted, tc.inOrder)
		}
		n := 0
		for c, err := range db.Scan(ctx, store.ScanRequest{Table: table}) {
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%s/%s", c.Row, strings.TrimSuffix(c.Column.Qualifier[1:], "\x00")); string(c.Value) != want {
				t.Fatalf("table %s: %q %q = %q, want %q", table, c.Row, c.Column.Qualifier, c.Value, want)
			}
			n++
		}
		if n != rows*perRow {
			t.Fatalf("table %s: %d cells read back, want %d", table, n, rows*perRow)
		}
	}
	lv := store.LevelTables(db)
	var total int64
	for _, n := range lv {
		total += n
	}
	if last := lv[len(lv)-1]; last != total || total < 4 {
		t.Fatalf("%d of %d sstables in the last level, want all (and at least 4)", last, total)
	}

	// The same version in two row transactions of its row, in the middle
	// of the request.
	twice := build("d")
	dup := *twice[rows/2-1]
	dup.Mutations = dup.Mutations[len(dup.Mutations)-1:]
	twice = slices.Insert(twice, rows/2, &dup)
	var ie *store.InvalidError
	if err := db.Ingest(ctx, twice); !errors.As(err, &ie) || !strings.Contains(err.Error(), "written twice") {
		t.Fatalf("a version written twice: %v, want an InvalidError", err)
	}
	for _, err := range db.Scan(ctx, store.ScanRequest{Table: "d"}) {
		t.Fatalf("table d holds cells after a refused ingest (%v)", err)
	}
	// The files of in-order attempts that stopped are gone.
	noFilesLeft(t, fs)
}

// An ingest whose context ends while it writes (here, between its
// in-order attempt and the sorted write) fails with the context's error,
// writes nothing and leaves no file behind.
func TestIngestCancelledWritesNothing(t *testing.T) {
	fs := vfs.NewMem()
	db, err := store.Open("db", memOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var txns []*store.RowTxn
	for i := range 5000 {
		txns = append(txns, &store.RowTxn{Table: "t", Row: fmt.Appendf(nil, "r%05d", 5000-i), Mutations: []store.Mutation{
			{Column: col("f", "q"), Ts: 3, Value: []byte("v")},
		}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sorted := 0
	store.SetSortedIngestHook(db, func() { sorted++; cancel() })
	if err := db.Ingest(ctx, txns); !errors.Is(err, context.Canceled) {
		t.Fatalf("ingest cancelled midway: %v, want context.Canceled", err)
	}
	if sorted != 1 {
		t.Fatalf("the request out of order was sorted %d times, want once (the cancellation did not happen midway)", sorted)
	}
	for _, err := range db.Scan(context.Background(), store.ScanRequest{Table: "t"}) {
		t.Fatalf("table t holds cells after a cancelled ingest (%v)", err)
	}
	noFilesLeft(t, fs)
}

// noFilesLeft fails t if the store in directory db of fs holds an sstable
// built for an ingest and not linked in.
func noFilesLeft(t *testing.T, fs vfs.FS) {
	t.Helper()
	names, err := fs.List("db")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".tmp") {
			t.Errorf("left behind: %s", n)
		}
	}
}
