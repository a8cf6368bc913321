package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// TestCompactTableDropsWhatWasDeleted checks why CompactTable exists:
// versions deleted after they reached an sstable stay below their
// tombstones, and a scan steps over both, until a compaction of the
// table's keys removes them; the table's other versions, and other
// tables, read the same after it.
func TestCompactTableDropsWhatWasDeleted(t *testing.T) {
	db := openMem(t, nil)
	c := col("f", "q")
	for i := range 50 {
		for _, table := range []string{"t", "u"} {
			put(t, db, table, fmt.Appendf(nil, "r%02d", i), c, 1, "v")
		}
	}
	if err := store.Flush(db); err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: fmt.Appendf(nil, "r%02d", i),
			Mutations: []store.Mutation{{Column: c, Ts: 1, Delete: true}}})
		if err != nil || !res.Applied {
			t.Fatalf("delete: %+v %v", res, err)
		}
	}
	visited := 0
	store.SetVisitHook(db, func([]byte) { visited++ })
	scan := func(table string) []store.Cell {
		visited = 0
		return mustCollect(t, db, store.ScanRequest{Table: table})
	}
	before := cellsString(scan("t"))
	visitedBefore := visited
	other := cellsString(scan("u"))
	if err := db.CompactTable(ctx, store.DefaultGroup, "t"); err != nil {
		t.Fatal(err)
	}
	if got := cellsString(scan("t")); len(got) != 10 || fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("after compaction table t reads %q, want %q (10 cells)", got, before)
	}
	if visitedBefore-visited < 40 {
		t.Errorf("the scan visited %d keys before compaction and %d after, want the 40 deleted versions gone", visitedBefore, visited)
	}
	if got := cellsString(scan("u")); fmt.Sprint(got) != fmt.Sprint(other) {
		t.Errorf("table u reads %q after compacting t, want %q", got, other)
	}
}

func TestCompactTableRejectsBadInput(t *testing.T) {
	db := openMem(t, nil)
	for _, tc := range []struct{ group, table, field string }{
		{"nosuch", "t", "group"},
		{store.DefaultGroup, "", "table"},
	} {
		err := db.CompactTable(ctx, tc.group, tc.table)
		var inv *store.InvalidError
		if !errors.As(err, &inv) || inv.Op != "CompactTable" || inv.Field != tc.field {
			t.Errorf("CompactTable(%q, %q) = %v, want an InvalidError naming %s", tc.group, tc.table, err, tc.field)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.CompactTable(ctx, store.DefaultGroup, "t"); !errors.Is(err, store.ErrClosed) {
		t.Errorf("CompactTable on a closed store = %v, want ErrClosed", err)
	}
}
