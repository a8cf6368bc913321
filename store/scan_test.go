package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
)

// TestScanOrderTrickyBytes writes rows and qualifiers full of 0x00/0xFF and
// prefixes of each other in shuffled order and expects byte order back.
func TestScanOrderTrickyBytes(t *testing.T) {
	db := openMem(t, nil)
	tricky := []string{"\x00", "\x00\x00", "\x00\x01", "\x00\xff", "\x01", "a", "a\x00", "a\x00b", "ab", "a\xff", "\xff", "\xff\xff"}
	var want []store.Cell
	for i := len(tricky) - 1; i >= 0; i-- { // write in reverse
		for j := len(tricky) - 1; j >= 0; j-- {
			put(t, db, "t", []byte(tricky[i]), col("f", tricky[j]), 1, tricky[i]+tricky[j])
			put(t, db, "t", []byte(tricky[i]), col("f", tricky[j]), 2, tricky[j]+tricky[i])
		}
	}
	for _, r := range tricky { // tricky is sorted
		for _, q := range tricky {
			want = append(want,
				store.Cell{Row: []byte(r), Column: col("f", q), Ts: 2, Value: []byte(q + r)},
				store.Cell{Row: []byte(r), Column: col("f", q), Ts: 1, Value: []byte(r + q)})
		}
	}
	if !slices.IsSorted(tricky) {
		t.Fatal("test data not sorted")
	}
	// Tables whose names extend "t" must not bleed into it.
	put(t, db, "t\x00", []byte("\x00"), col("f", "q"), 1, "x")
	put(t, db, "t\xff", []byte("\x00"), col("f", "q"), 1, "x")
	put(t, db, "s\xff", []byte("\xff"), col("f", "q"), 1, "x")
	assertCells(t, mustCollect(t, db, store.ScanRequest{Table: "t"}), want)
}

func TestScanStartEndAfter(t *testing.T) {
	db := openMem(t, nil)
	var m model
	for _, r := range []string{"a", "b", "b\x00", "c", "d"} {
		for _, q := range []string{"x", "y"} {
			put(t, db, "t", []byte(r), col("f", q), 1, r+q)
			m = append(m, store.Cell{Row: []byte(r), Column: col("f", q), Ts: 1, Value: []byte(r + q)})
		}
	}
	tests := []store.ScanRequest{
		{Start: []byte("b")},
		{End: []byte("c")},
		{Start: []byte("b"), End: []byte("c")},
		{Start: []byte("b\x00"), End: []byte("b\x00")},
		{Start: []byte("c"), End: []byte("b")},
		{After: &store.Position{Row: []byte("b"), Column: col("f", "x")}},
		{After: &store.Position{Row: []byte("b"), Column: col("f", "y")}},
		{After: &store.Position{Row: []byte("b"), Column: col("f", "")}},
		{After: &store.Position{Row: []byte("a"), Column: col("f", "y")}, Start: []byte("c")},
		{After: &store.Position{Row: []byte("z"), Column: col("f", "y")}},
	}
	for _, req := range tests {
		req.Table = "t"
		t.Run(fmt.Sprintf("%q-%q-%v", req.Start, req.End, req.After), func(t *testing.T) {
			assertCells(t, mustCollect(t, db, req), m.scan(req))
		})
	}
}

// TestScanPaging pages through a table with After and a page size enforced
// by breaking out of the loop, and expects the concatenation to be the full
// scan. Breaking must close the iterator (Close would report a leak).
func TestScanPaging(t *testing.T) {
	db := openMem(t, nil)
	for r := range 20 {
		for q := range 3 {
			for ts := range 3 {
				put(t, db, "t", []byte{byte(r)}, col("f", fmt.Sprint(q)), uint64(ts+1), "v")
			}
		}
	}
	full := mustCollect(t, db, store.ScanRequest{Table: "t", Spans: []store.Span{{MaxTs: ^uint64(0), Limit: 1}}})
	if len(full) != 60 {
		t.Fatalf("full scan has %d cells, want 60", len(full))
	}
	var paged []store.Cell
	var after *store.Position
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("paging does not terminate")
		}
		n := 0
		for c, err := range db.Scan(ctx, store.ScanRequest{Table: "t", After: after, Spans: []store.Span{{MaxTs: ^uint64(0), Limit: 1}}}) {
			if err != nil {
				t.Fatal(err)
			}
			paged = append(paged, c)
			after = &store.Position{Row: c.Row, Column: c.Column}
			if n++; n == 7 {
				break
			}
		}
		if n == 0 {
			break
		}
	}
	assertCells(t, paged, full)
}

func TestScanFilter(t *testing.T) {
	db := openMem(t, &store.Options{FS: vfs.NewMem(), Logger: quietLogger,
		Groups: map[string]string{"lock": "meta", "write": "meta"}})
	var def, meta model
	for _, r := range []string{"r1", "r2"} {
		for _, c := range []store.Column{col("data", "a"), col("data", "b"), col("data\x00", "a"), col("datb", ""), col("lock", ""), col("write", "")} {
			put(t, db, "t", []byte(r), c, 1, r)
			cell := store.Cell{Row: []byte(r), Column: c, Ts: 1, Value: []byte(r)}
			if c.Family == "lock" || c.Family == "write" {
				meta = append(meta, cell)
			} else {
				def = append(def, cell)
			}
		}
	}
	tests := []struct {
		group string
		m     model
		f     store.ColumnFilter
	}{
		{"", def, store.ColumnFilter{}},
		{"", def, store.ColumnFilter{Families: []string{"data"}}},
		{"", def, store.ColumnFilter{Families: []string{"datb", "data\x00"}}},
		{"", def, store.ColumnFilter{Columns: []store.Column{col("data", "b")}}},
		{"", def, store.ColumnFilter{Columns: []store.Column{col("data", "b"), col("datb", "")}, Families: []string{"data\x00"}}},
		{"", def, store.ColumnFilter{Columns: []store.Column{col("data", "zz")}}},
		{"meta", meta, store.ColumnFilter{}},
		{"meta", meta, store.ColumnFilter{Families: []string{"write"}}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s-%v", tc.group, tc.f), func(t *testing.T) {
			req := store.ScanRequest{Table: "t", Group: tc.group, Filter: tc.f}
			assertCells(t, mustCollect(t, db, req), tc.m.scan(req))
		})
	}
	_, err := collect(t, db.Scan(ctx, store.ScanRequest{Table: "t", Group: "meta", Filter: store.ColumnFilter{Families: []string{"data"}}}))
	var ie *store.InvalidError
	if !errors.As(err, &ie) || ie.Field != "Filter.Families[0]" {
		t.Fatalf("filter family outside group: err = %v", err)
	}
}

// TestScanNotifyNeverVisitsDefault proves that scanning the notify group
// never reads a key of the default group, even when the same rows hold many
// default-group cells: every key any iterator visits (as seen by pebble's
// SkipPoint and by our cursor) must carry the notify group byte.
func TestScanNotifyNeverVisitsDefault(t *testing.T) {
	// A third group sorts after notify, so a scan overrunning the notify
	// range in either direction would find keys.
	db := openMem(t, &store.Options{FS: vfs.NewMem(), Logger: quietLogger, Groups: map[string]string{"zzz": "z", sideFamily: sideGroup}})
	for r := range 50 {
		row := []byte(fmt.Sprintf("row%03d", r))
		for q := range 20 {
			put(t, db, "t", row, col("data", fmt.Sprint(q)), 1, "payload")
		}
		put(t, db, "t", row, col("aaa", ""), 1, "sorts before ntfy")
		put(t, db, "t", row, col("zzz", ""), 1, "group after notify")
		put(t, db, "t", row, col("zz", ""), 1, "sorts after ntfy")
		if r%10 == 0 {
			put(t, db, "t", row, col(sideFamily, "data:0"), 1, "")
		}
	}
	put(t, db, "a", []byte("r"), col("data", ""), 1, "table before")
	put(t, db, "u", []byte("r"), col("data", ""), 1, "table after")
	nb, _ := store.GroupByte(db, sideGroup)
	var visited, foreign int
	store.SetVisitHook(db, func(k []byte) {
		visited++
		if len(k) == 0 || k[0] != nb {
			foreign++
		}
	})
	got := mustCollect(t, db, store.ScanRequest{Table: "t", Group: sideGroup})
	if len(got) != 5 {
		t.Fatalf("notify scan returned %d cells, want 5", len(got))
	}
	if visited < 5 || foreign != 0 {
		t.Fatalf("visited %d keys, %d outside the notify group", visited, foreign)
	}
	// The hook does see default-group keys when the default group is scanned,
	// so the assertion above can fail.
	visited, foreign = 0, 0
	mustCollect(t, db, store.ScanRequest{Table: "t", Filter: store.ColumnFilter{Families: []string{"zz"}}})
	if foreign == 0 {
		t.Fatal("visit hook saw no default-group keys in a default-group scan")
	}
}

// TestScanSeeksBetweenColumns checks that a newest-version scan does not
// step through every old version.
func TestScanSeeksBetweenColumns(t *testing.T) {
	db := openMem(t, nil)
	for q := range 3 {
		for ts := range 100 {
			put(t, db, "t", []byte("r"), col("f", fmt.Sprint(q)), uint64(ts+1), "v")
		}
	}
	visited := 0
	store.SetVisitHook(db, func([]byte) { visited++ })
	got := mustCollect(t, db, store.ScanRequest{Table: "t", Spans: []store.Span{{MaxTs: ^uint64(0), Limit: 1}}})
	if len(got) != 3 || got[0].Ts != 100 {
		t.Fatalf("got %q", cellsString(got))
	}
	if visited > 30 {
		t.Fatalf("visited %d keys for 3 newest versions", visited)
	}
}

// TestScanLockThenWriteSpansStep checks that a scan with a transactional
// read's spans (the lock version, then the newest write at or below the
// snapshot) does not seek per column: a column's first version is where
// both spans start when the column is unlocked and has no write newer than
// the snapshot, so the scan steps from column to column with Next. Only a
// column with versions newer than the second span takes a seek (and one
// more to leave it). Folded counter deltas leave many such dead columns
// that every count scans.
func TestScanLockThenWriteSpansStep(t *testing.T) {
	db := openMem(t, nil)
	for q := range 10 {
		for _, ts := range []uint64{50, 40} {
			put(t, db, "t", []byte("r"), col("f", fmt.Sprint(q)), ts, fmt.Sprint(q, "@", ts))
		}
	}
	put(t, db, "t", []byte("r"), col("f", "3"), 100, "lock")
	put(t, db, "t", []byte("r"), col("f", "7"), 70, "too new")
	var seeks [][]byte
	store.SetSeekHook(db, func(k []byte) { seeks = append(seeks, slices.Clone(k)) })
	spans := []store.Span{{MinTs: 100, MaxTs: 100, Limit: 1}, {MaxTs: 60, Limit: 1}}
	got := mustCollect(t, db, store.ScanRequest{Table: "t", Spans: spans})
	var want []string
	for q := range 10 {
		if q == 3 {
			want = append(want, `"r"/f:3@100="lock"`)
		}
		want = append(want, fmt.Sprintf(`"r"/f:%d@50="%d@50"`, q, q))
	}
	if g := cellsString(got); !slices.Equal(g, want) {
		t.Fatalf("got  %q\nwant %q", g, want)
	}
	// The scan's first seek, then column 7's span seek and the seek out
	// of it (a span seek confines the cursor to its column).
	if len(seeks) != 3 {
		t.Fatalf("%d seeks (%x), want 3", len(seeks), seeks)
	}
}

// TestReadRowSkipsSeeks checks the seeks ReadRow issues: one prefix seek per
// column, and none for a later span of the column when the cursor is already
// at or past it having consumed everything in between (the lock span then
// newest-write span of a transactional read).
func TestReadRowSkipsSeeks(t *testing.T) {
	db := openMem(t, nil)
	cols := []store.Column{col("f", "a"), col("f", "b"), col("f", "c")}
	for _, c := range cols {
		put(t, db, "t", []byte("r"), c, 5, "v")
	}
	for _, ts := range []uint64{50, 40} {
		put(t, db, "t", []byte("r"), col("g", ""), ts, "w")
	}
	var seeks [][]byte
	store.SetSeekHook(db, func(k []byte) { seeks = append(seeks, slices.Clone(k)) })
	for _, tc := range []struct {
		name  string
		cols  []store.Column
		spans []store.Span
		cells int
		seeks int
	}{
		{"one seek per column", cols, []store.Span{{MaxTs: 10, Limit: 1}}, 3, 3},
		{"absent lock then write", []store.Column{col("g", "")},
			[]store.Span{{MinTs: 100, MaxTs: 100, Limit: 1}, {MaxTs: 60, Limit: 1}}, 1, 1},
		{"present lock then write", []store.Column{col("g", "")},
			[]store.Span{{MinTs: 50, MaxTs: 50, Limit: 1}, {MaxTs: 45, Limit: 1}}, 2, 1},
		{"span below the position seeks", []store.Column{col("g", "")},
			[]store.Span{{MinTs: 45, MaxTs: 100}, {MaxTs: 30}}, 1, 2},
		{"ascending spans seek", []store.Column{col("g", "")},
			[]store.Span{{MinTs: 30, MaxTs: 45}, {MinTs: 46, MaxTs: 100}}, 2, 2},
	} {
		seeks = seeks[:0]
		got, err := db.ReadRow(ctx, "t", []byte("r"), tc.cols, tc.spans)
		if err != nil || len(got) != tc.cells {
			t.Fatalf("%s: %q %v", tc.name, cellsString(got), err)
		}
		if len(seeks) != tc.seeks {
			t.Fatalf("%s: %d seeks (%x), want %d", tc.name, len(seeks), seeks, tc.seeks)
		}
	}
}

func TestScanContextCanceled(t *testing.T) {
	db := openMem(t, nil)
	for r := range 1000 {
		put(t, db, "t", []byte(fmt.Sprintf("%04d", r)), col("f", ""), 1, "v")
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := 0
	var err error
	for _, e := range db.Scan(cctx, store.ScanRequest{Table: "t"}) {
		if e != nil {
			err = e
			break
		}
		if n++; n == 10 {
			cancel()
		}
	}
	if !errors.Is(err, context.Canceled) || n >= 1000 {
		t.Fatalf("after cancel: n=%d err=%v", n, err)
	}
}

func TestTables(t *testing.T) {
	db := openMem(t, nil)
	names := []string{"a", "a\x00", "a\x00b", "ab", "b", "\xff"}
	for _, name := range names {
		for r := range 5 {
			put(t, db, name, []byte{byte(r)}, col("f", ""), 1, "v")
		}
	}
	put(t, db, "n", []byte("r"), col(sideFamily, ""), 1, "")
	visited := 0
	store.SetVisitHook(db, func([]byte) { visited++ })
	got, err := db.Tables(ctx, "")
	if err != nil || !slices.Equal(got, names) {
		t.Fatalf("Tables(default) = %q, %v; want %q", got, err, names)
	}
	if visited > 2*len(names)+2 {
		t.Fatalf("Tables visited %d keys for %d tables", visited, len(names))
	}
	if got, err := db.Tables(ctx, sideGroup); err != nil || !slices.Equal(got, []string{"n"}) {
		t.Fatalf("Tables(notify) = %q, %v", got, err)
	}
	if _, err := db.Tables(ctx, "nope"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Tables(unknown) err = %v", err)
	}
}

// TestScanCellsOwnMemory keeps cells across iterations and checks they are
// not overwritten by later ones.
func TestScanCellsOwnMemory(t *testing.T) {
	db := openMem(t, nil)
	for r := range 100 {
		put(t, db, "t", []byte(fmt.Sprintf("row%03d", r)), col("f", "q"), 1, fmt.Sprintf("value%03d", r))
	}
	got := mustCollect(t, db, store.ScanRequest{Table: "t"})
	for i, c := range got {
		if !bytes.Equal(c.Row, []byte(fmt.Sprintf("row%03d", i))) || string(c.Value) != fmt.Sprintf("value%03d", i) {
			t.Fatalf("cell %d = %s", i, cellString(c))
		}
	}
}

// TestCompactGroupKeepsLiveCells: compacting the notify group (which
// drops the tombstones of processed notifications; BenchmarkScanTombstones
// in package scanner measures the effect) keeps every live cell of the group
// and of the default group, and rejects unknown groups.
func TestCompactGroupKeepsLiveCells(t *testing.T) {
	db := openMem(t, nil)
	n, d := col(sideFamily, "q"), col("f", "v")
	row := func(i int) []byte { return []byte(fmt.Sprintf("r%05d", i)) }
	for i := range 2000 {
		put(t, db, "t", row(i), n, 1, "")
		put(t, db, "t", row(i), d, 1, "data")
	}
	if err := store.Flush(db); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if i%100 == 0 {
			continue
		}
		if _, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: row(i), Mutations: []store.Mutation{{Column: n, Ts: 1, Delete: true}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CompactGroup(ctx, sideGroup); err != nil {
		t.Fatal(err)
	}
	if got := mustCollect(t, db, store.ScanRequest{Table: "t", Group: sideGroup}); len(got) != 20 {
		t.Fatalf("%d live notify cells after compaction, want 20", len(got))
	}
	if got := mustCollect(t, db, store.ScanRequest{Table: "t"}); len(got) != 2000 {
		t.Fatalf("%d data cells after compacting the notify group, want 2000", len(got))
	}
	if err := db.CompactGroup(ctx, "nope"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("unknown group: %v", err)
	}
}

// TestScanOfOneRowReadsOnlyWantedColumns checks that a filtered scan of a
// single row (End is Start followed by a zero byte) iterates only the part
// of the row its filter wants: one seek, to the first wanted column, and no
// key of another family or row visited. Counting a row's queued deltas, or
// listing a cluster's members, is such a scan, and observers make one per
// run.
func TestScanOfOneRowReadsOnlyWantedColumns(t *testing.T) {
	db := openMem(t, nil)
	for _, row := range []string{"q", "r", "r\x00", "r\x00a", "s"} {
		for q := range 20 {
			put(t, db, "t", []byte(row), col("a", fmt.Sprint(q)), 1, "before")
			put(t, db, "t", []byte(row), col("z", fmt.Sprint(q)), 1, "after")
		}
		for q := range 3 {
			put(t, db, "t", []byte(row), col("f", fmt.Sprint(q)), 1, row)
			put(t, db, "t", []byte(row), col("m", fmt.Sprint(q)), 1, row)
		}
	}
	var seeks int
	var foreign []string
	store.SetSeekHook(db, func([]byte) { seeks++ })
	store.SetVisitHook(db, func(k []byte) {
		if s := fmt.Sprintf("%q", k); !strings.Contains(s, `r\x00\x01f`) && !strings.Contains(s, `r\x00\x01m`) {
			foreign = append(foreign, s)
		}
	})
	for _, tc := range []struct {
		name   string
		filter store.ColumnFilter
		want   []string
	}{
		{"one family", store.ColumnFilter{Families: []string{"f"}},
			[]string{`"r"/f:0@1="r"`, `"r"/f:1@1="r"`, `"r"/f:2@1="r"`}},
		{"a family and a column in it", store.ColumnFilter{Families: []string{"f"}, Columns: []store.Column{col("f", "1")}},
			[]string{`"r"/f:0@1="r"`, `"r"/f:1@1="r"`, `"r"/f:2@1="r"`}},
		{"two families", store.ColumnFilter{Families: []string{"m", "f"}},
			[]string{`"r"/f:0@1="r"`, `"r"/f:1@1="r"`, `"r"/f:2@1="r"`, `"r"/m:0@1="r"`, `"r"/m:1@1="r"`, `"r"/m:2@1="r"`}},
		{"columns", store.ColumnFilter{Columns: []store.Column{col("m", "2"), col("f", "1")}},
			[]string{`"r"/f:1@1="r"`, `"r"/m:2@1="r"`}},
	} {
		seeks, foreign = 0, nil
		got := mustCollect(t, db, store.ScanRequest{Table: "t", Start: []byte("r"), End: []byte("r\x00"), Filter: tc.filter})
		if g := cellsString(got); !slices.Equal(g, tc.want) {
			t.Fatalf("%s: got %q\nwant %q", tc.name, g, tc.want)
		}
		if len(foreign) > 0 {
			t.Fatalf("%s: visited keys outside the wanted columns: %q", tc.name, foreign)
		}
		// The columns filter skips from f:1 to m:2 with a seek.
		if want := map[bool]int{false: 1, true: 2}[tc.name == "columns"]; seeks != want {
			t.Fatalf("%s: %d seeks, want %d", tc.name, seeks, want)
		}
	}
	// The same filter over a range of rows still finds every row's columns.
	got := mustCollect(t, db, store.ScanRequest{Table: "t", Start: []byte("r"), End: []byte("s"), Filter: store.ColumnFilter{Families: []string{"f"}}})
	if len(got) != 9 {
		t.Fatalf("range scan: got %q, want f of r, r\\x00 and r\\x00a", cellsString(got))
	}
}
