package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// TestReadRowsMatchesReadRow reads random batches (rows of several tables
// and groups, repeated rows, reads without columns, exact-version reads)
// and checks that result i is what ReadRow returns for reads[i], and what
// the model says.
func TestReadRowsMatchesReadRow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	db := openMem(t, nil)
	tables := []string{"t", "u\x00", "\xff"}
	rows := [][]byte{[]byte("a"), []byte("a\x00"), []byte("b"), {0xFF}}
	cols := []store.Column{col("f", ""), col("f", "q"), col("g", "q"), col(sideFamily, "x"), col(sideFamily, "")}
	models := map[string]model{}
	seen := map[string]bool{}
	for range 600 {
		tb := tables[rng.IntN(len(tables))]
		c := store.Cell{Row: rows[rng.IntN(len(rows))], Column: cols[rng.IntN(len(cols))],
			Ts: uint64(1 + rng.IntN(30)), Value: []byte{byte(rng.IntN(256))}}
		put(t, db, tb, c.Row, c.Column, c.Ts, string(c.Value))
		if k := tb + "/" + cellKey(c); !seen[k] {
			seen[k] = true
			models[tb] = append(models[tb], c)
		} else {
			for i, x := range models[tb] {
				if cellKey(x) == cellKey(c) {
					models[tb][i] = c
				}
			}
		}
	}
	randRead := func() store.RowRead {
		r := store.RowRead{Table: tables[rng.IntN(len(tables))], Row: rows[rng.IntN(len(rows))]}
		group := cols[:3]
		if rng.IntN(3) == 0 {
			group = cols[3:]
		}
		for range rng.IntN(4) {
			r.Columns = append(r.Columns, group[rng.IntN(len(group))])
		}
		switch rng.IntN(4) {
		case 1:
			r.Spans = []store.Span{{MaxTs: 20, Limit: 1}}
		case 2:
			ts := uint64(1 + rng.IntN(30))
			r.Columns = r.Columns[:min(len(r.Columns), 1)]
			r.Spans = []store.Span{{MinTs: ts, MaxTs: ts}} // a Get
		case 3:
			r.Spans = []store.Span{{MinTs: 25, MaxTs: ^uint64(0), Limit: 1}, {MaxTs: 10, Limit: 2}}
		}
		return r
	}
	for i := range 300 {
		reads := make([]store.RowRead, rng.IntN(12))
		for j := range reads {
			reads[j] = randRead()
		}
		got, err := db.ReadRows(ctx, reads)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if len(got) != len(reads) {
			t.Fatalf("batch %d: %d results for %d reads", i, len(got), len(reads))
		}
		for j, r := range reads {
			want, err := db.ReadRow(ctx, r.Table, r.Row, r.Columns, r.Spans)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := cellsString(got[j]), cellsString(want); !slices.Equal(g, w) {
				t.Fatalf("batch %d read %d %+v\n got: %q\nwant: %q", i, j, r, g, w)
			}
			if g, w := cellsString(got[j]), cellsString(models[r.Table].readRow(r.Row, r.Columns, r.Spans)); !slices.Equal(g, w) {
				t.Fatalf("batch %d read %d %+v: store and model differ\n got: %q\nwant: %q", i, j, r, g, w)
			}
		}
	}
}

// TestReadRowsOrderAndMixedTables: results come in request order, not key
// order, rows of different tables and groups mix, a repeated read gets its
// own copy, and a read without columns gets nothing.
func TestReadRowsOrderAndMixedTables(t *testing.T) {
	db := openMem(t, nil)
	data, ntfy := col("f", "v"), col(sideFamily, "v")
	put(t, db, "users", []byte("zed"), data, 1, "zed@users")
	put(t, db, "users", []byte("amy"), data, 1, "amy@users")
	put(t, db, "index", []byte("amy"), data, 1, "amy@index")
	put(t, db, "index", []byte("amy"), ntfy, 2, "amy@index/notify")
	reads := []store.RowRead{
		{Table: "users", Row: []byte("zed"), Columns: []store.Column{data}},
		{Table: "index", Row: []byte("amy"), Columns: []store.Column{ntfy}},
		{Table: "users", Row: []byte("amy"), Columns: []store.Column{data}},
		{Table: "users", Row: []byte("nobody"), Columns: []store.Column{data}},
		{Table: "index", Row: []byte("amy")},
		{Table: "index", Row: []byte("amy"), Columns: []store.Column{data}},
		{Table: "users", Row: []byte("zed"), Columns: []store.Column{data}},
	}
	got, err := db.ReadRows(ctx, reads)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"zed@users", "amy@index/notify", "amy@users", "", "", "amy@index", "zed@users"}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i, w := range want {
		var g string
		if len(got[i]) > 1 {
			t.Fatalf("result %d: %q", i, cellsString(got[i]))
		}
		if len(got[i]) == 1 {
			g = string(got[i][0].Value)
			if string(got[i][0].Row) != string(reads[i].Row) {
				t.Errorf("result %d: row %q, want %q", i, got[i][0].Row, reads[i].Row)
			}
		}
		if g != w {
			t.Errorf("result %d: %q, want %q", i, g, w)
		}
	}
	got[0][0].Value[0] = 'X'
	if string(got[6][0].Value) != "zed@users" {
		t.Fatalf("two results share memory: %q", got[6][0].Value)
	}
}

// TestReadRowsSnapshot: writes committed while a ReadRows call runs are
// invisible to all of its rows, exact-version reads (which ReadRow serves
// with Get) included.
func TestReadRowsSnapshot(t *testing.T) {
	db := openMem(t, nil)
	c := col("f", "v")
	for _, r := range []string{"a", "b", "c"} {
		put(t, db, "t", []byte(r), c, 10, r+"@10")
	}
	store.SetAfterReadHook(db, func(i int) {
		if i != 0 {
			return
		}
		put(t, db, "t", []byte("b"), c, 20, "b@20")
		put(t, db, "t", []byte("c"), c, 30, "c@30")
		put(t, db, "t", []byte("d"), c, 5, "d@5")
	})
	got, err := db.ReadRows(ctx, []store.RowRead{
		{Table: "t", Row: []byte("a"), Columns: []store.Column{c}, Spans: []store.Span{{MinTs: 10, MaxTs: 10}}}, // exact version
		{Table: "t", Row: []byte("b"), Columns: []store.Column{c}},
		{Table: "t", Row: []byte("c"), Columns: []store.Column{c}, Spans: []store.Span{{MinTs: 30, MaxTs: 30}}}, // exact version
		{Table: "t", Row: []byte("d"), Columns: []store.Column{c}, Spans: []store.Span{{MaxTs: 100, Limit: 1}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	store.SetAfterReadHook(db, nil)
	want := [][]string{{"a@10"}, {"b@10"}, nil, nil}
	for i := range want {
		var g []string
		for _, x := range got[i] {
			g = append(g, string(x.Value))
		}
		if !slices.Equal(g, want[i]) {
			t.Errorf("row %d: %q, want %q (a write after the call began is visible)", i, g, want[i])
		}
	}
	// The writes happened: a later call sees them.
	if cells, err := db.ReadRow(ctx, "t", []byte("b"), []store.Column{c}, nil); err != nil || len(cells) != 2 {
		t.Fatalf("after the call: %q %v", cellsString(cells), err)
	}
}

// TestReadRowsInvalid: a bad read fails the call with an InvalidError
// naming it by index, before any read is executed.
func TestReadRowsInvalid(t *testing.T) {
	db := openMem(t, nil)
	ok := col("f", "q")
	good := store.RowRead{Table: "t", Row: []byte("r"), Columns: []store.Column{ok}}
	with := func(i int, bad store.RowRead) []store.RowRead {
		reads := []store.RowRead{good, good, good, good, good}
		reads[i] = bad
		return reads
	}
	var executed []int
	store.SetAfterReadHook(db, func(i int) { executed = append(executed, i) })
	for _, tc := range []struct {
		field string
		reads []store.RowRead
	}{
		{"reads[3].Columns[0]", with(3, store.RowRead{Table: "t", Row: []byte("r"), Columns: []store.Column{{Qualifier: "q"}}})},
		{"reads[1].Columns[1].Family", with(1, store.RowRead{Table: "t", Row: []byte("r"), Columns: []store.Column{ok, col(sideFamily, "")}})},
		{"reads[0].Table", with(0, store.RowRead{Row: []byte("r"), Columns: []store.Column{ok}})},
		{"reads[4].Row", with(4, store.RowRead{Table: "t", Row: []byte{}, Columns: []store.Column{ok}})},
		{"reads[2].Spans[1]", with(2, store.RowRead{Table: "t", Row: []byte("r"), Columns: []store.Column{ok},
			Spans: []store.Span{{MinTs: 5, MaxTs: 9}, {MaxTs: 5}}})},
		{"reads[2].Spans[0]", with(2, store.RowRead{Table: "t", Row: []byte("r"), Spans: []store.Span{{MinTs: 2, MaxTs: 1}}})},
		{"reads[4].Spans[0].Limit", with(4, store.RowRead{Table: "t", Row: []byte("r"), Spans: []store.Span{{MaxTs: 1, Limit: -1}}})},
		{"reads", make([]store.RowRead, store.MaxRowReads+1)},
	} {
		_, err := db.ReadRows(ctx, tc.reads)
		var ie *store.InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, store.ErrInvalid) || ie.Op != "ReadRows" || ie.Field != tc.field {
			t.Errorf("%s: err = %v", tc.field, err)
		}
		if !strings.Contains(fmt.Sprint(err), tc.field) {
			t.Errorf("%s: the message does not name the field: %v", tc.field, err)
		}
	}
	if len(executed) != 0 {
		t.Errorf("reads %v were executed in calls that failed validation", executed)
	}
	// The bound itself is allowed.
	full := make([]store.RowRead, store.MaxRowReads)
	for i := range full {
		full[i] = store.RowRead{Table: "t", Row: []byte("r")}
	}
	if got, err := db.ReadRows(ctx, full); err != nil || len(got) != store.MaxRowReads {
		t.Fatalf("MaxRowReads reads: %d results, %v", len(got), err)
	}
}

// TestReadRowsEmptyAndClosed: no reads is a valid call that returns no
// results without touching the store, even a closed one; other calls on a
// closed store or with a done context fail.
func TestReadRowsEmptyAndClosed(t *testing.T) {
	db := openMem(t, nil)
	for _, reads := range [][]store.RowRead{nil, {}} {
		if got, err := db.ReadRows(ctx, reads); err != nil || len(got) != 0 {
			t.Fatalf("ReadRows(%#v) = %v, %v", reads, got, err)
		}
	}
	if got, err := db.ReadRows(ctx, []store.RowRead{{Table: "t", Row: []byte("r")}}); err != nil || len(got) != 1 || got[0] != nil {
		t.Fatalf("a read without columns: %v, %v", got, err)
	}
	read := []store.RowRead{{Table: "t", Row: []byte("r"), Columns: []store.Column{col("f", "")}}}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := db.ReadRows(canceled, read); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ReadRows(ctx, read); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	if got, err := db.ReadRows(ctx, nil); err != nil || got != nil {
		t.Fatalf("empty call after Close: %v, %v", got, err)
	}
}
