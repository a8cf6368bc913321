package store_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

func TestReadRowSpans(t *testing.T) {
	db := openMem(t, nil)
	row := []byte("r")
	a, b, e := col("f", "a"), col("f", "b"), col("f", "empty")
	var m model
	for ts := uint64(1); ts <= 10; ts++ {
		for _, c := range []store.Column{a, b} {
			v := c.Qualifier + string(rune('0'+ts))
			put(t, db, "t", row, c, ts*10, v)
			m = append(m, store.Cell{Row: row, Column: c, Ts: ts * 10, Value: []byte(v)})
		}
	}
	max := ^uint64(0)
	tests := []struct {
		name  string
		cols  []store.Column
		spans []store.Span
		want  int // number of cells, cross-checked against the model
	}{
		{"all versions", []store.Column{a}, nil, 10},
		{"newest", []store.Column{a}, []store.Span{{MaxTs: max, Limit: 1}}, 1},
		{"newest at or below 55", []store.Column{a, b}, []store.Span{{MaxTs: 55, Limit: 1}}, 2},
		{"range", []store.Column{a}, []store.Span{{MinTs: 30, MaxTs: 60}}, 4},
		{"range limit", []store.Column{a}, []store.Span{{MinTs: 30, MaxTs: 60, Limit: 2}}, 2},
		{"two spans", []store.Column{a, b}, []store.Span{{MinTs: 81, MaxTs: max, Limit: 1}, {MaxTs: 40, Limit: 2}}, 6},
		{"ascending spans", []store.Column{a}, []store.Span{{MaxTs: 20}, {MinTs: 50, MaxTs: 70}}, 5},
		{"missing column", []store.Column{e}, nil, 0},
		{"missing between", []store.Column{a, e, b}, []store.Span{{MaxTs: max, Limit: 1}}, 2},
		{"reverse order", []store.Column{b, a}, []store.Span{{MaxTs: 35, Limit: 1}}, 2},
		{"duplicate column", []store.Column{a, a}, []store.Span{{MaxTs: max}}, 20},
		{"duplicate after other", []store.Column{a, b, a}, []store.Span{{MinTs: 95, MaxTs: max}}, 3},
		{"span empty", []store.Column{a}, []store.Span{{MinTs: 11, MaxTs: 19}}, 0},
		{"exact ts", []store.Column{a}, []store.Span{{MinTs: 70, MaxTs: 70}}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := db.ReadRow(ctx, "t", row, tc.cols, tc.spans)
			if err != nil {
				t.Fatal(err)
			}
			want := m.readRow(row, tc.cols, tc.spans)
			assertCells(t, got, want)
			if len(got) != tc.want {
				t.Fatalf("got %d cells, want %d", len(got), tc.want)
			}
		})
	}
}

func TestReadRowGroupMismatch(t *testing.T) {
	db := openMem(t, nil)
	_, err := db.ReadRow(ctx, "t", []byte("r"), []store.Column{col("data", "x"), col(sideFamily, "x")}, nil)
	var ie *store.InvalidError
	if !errors.As(err, &ie) || !errors.Is(err, store.ErrInvalid) || ie.Op != "ReadRow" || ie.Field != "cols[1].Family" {
		t.Fatalf("err = %v", err)
	}
}

// TestReadRowOwnsMemory mutates returned cells and the inputs and reads again.
func TestReadRowOwnsMemory(t *testing.T) {
	db := openMem(t, nil)
	row := []byte("row")
	put(t, db, "t", row, col("f", "q"), 1, "value")
	put(t, db, "t", row, col("f", "q"), 2, "other")
	got, err := db.ReadRow(ctx, "t", row, []store.Column{col("f", "q")}, nil)
	if err != nil || len(got) != 2 {
		t.Fatal(got, err)
	}
	got[0].Row[0] = 'X'
	got[0].Value[0] = 'X'
	_ = append(got[0].Row, "zzzz"...) // must not spill into Value
	if string(got[0].Value) != "Xther" || string(got[1].Row) != "row" || string(got[1].Value) != "value" {
		t.Fatalf("cells share memory: %q", cellsString(got))
	}
	row[0] = 'X'
	again, err := db.ReadRow(ctx, "t", []byte("row"), []store.Column{col("f", "q")}, nil)
	if err != nil || len(again) != 2 || string(again[0].Value) != "other" {
		t.Fatalf("store changed through returned memory: %q %v", cellsString(again), err)
	}
}

// TestReadRowAndScanMatchModel compares ReadRow and Scan with a naive model
// on random data, random columns and random (ordered or not) spans. It is the
// main guard for the seek-skipping logic.
func TestReadRowAndScanMatchModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	db := openMem(t, nil)
	rows := [][]byte{[]byte("a"), []byte("a\x00"), []byte("b"), {0xFF}}
	cols := []store.Column{col("f", ""), col("f", "q"), col("f", "q\x00"), col("g", "q"), col("g\x00", "")}
	cells := map[string]store.Cell{}
	for range 400 {
		c := store.Cell{Row: rows[rng.IntN(len(rows))], Column: cols[rng.IntN(len(cols))],
			Ts: uint64(rng.IntN(40)), Value: []byte{byte(rng.IntN(256))}}
		put(t, db, "t", c.Row, c.Column, c.Ts, string(c.Value))
		cells[cellKey(c)] = c
	}
	// Noise in other tables and groups that must never show up.
	put(t, db, "s", []byte("a"), col("f", "q"), 1, "other table")
	put(t, db, "t", []byte("a"), col(sideFamily, "q"), 1, "other group")
	var m model
	for _, c := range cells {
		m = append(m, c)
	}
	randSpans := func() []store.Span {
		var spans []store.Span
		hi := uint64(45)
		for range rng.IntN(4) {
			if hi < 2 {
				break
			}
			max := hi - uint64(rng.IntN(int(hi/2)+1))
			min := max - uint64(rng.IntN(int(max)+1))
			spans = append(spans, store.Span{MinTs: min, MaxTs: max, Limit: rng.IntN(4)})
			if min == 0 {
				break
			}
			hi = min - 1
		}
		if rng.IntN(4) == 0 { // ascending order is legal too
			for i, j := 0, len(spans)-1; i < j; i, j = i+1, j-1 {
				spans[i], spans[j] = spans[j], spans[i]
			}
		}
		return spans
	}
	for i := range 2000 {
		row := rows[rng.IntN(len(rows))]
		var rc []store.Column
		for range rng.IntN(5) {
			rc = append(rc, cols[rng.IntN(len(cols))])
		}
		spans := randSpans()
		got, err := db.ReadRow(ctx, "t", row, rc, spans)
		if err != nil {
			t.Fatal(err)
		}
		if g, w := cellsString(got), cellsString(m.readRow(row, rc, spans)); !slices.Equal(g, w) {
			t.Fatalf("iteration %d ReadRow(%q, %v, %+v)\n got: %q\nwant: %q", i, row, rc, spans, g, w)
		}

		req := store.ScanRequest{Table: "t", Spans: randSpans()}
		if rng.IntN(2) == 0 {
			req.Start = rows[rng.IntN(len(rows))]
		}
		if rng.IntN(2) == 0 {
			req.End = rows[rng.IntN(len(rows))]
		}
		if rng.IntN(2) == 0 {
			req.After = &store.Position{Row: rows[rng.IntN(len(rows))], Column: cols[rng.IntN(len(cols))]}
		}
		for range rng.IntN(3) {
			if rng.IntN(2) == 0 {
				req.Filter.Families = append(req.Filter.Families, cols[rng.IntN(len(cols))].Family)
			} else {
				req.Filter.Columns = append(req.Filter.Columns, cols[rng.IntN(len(cols))])
			}
		}
		got = mustCollect(t, db, req)
		if g, w := cellsString(got), cellsString(m.scan(req)); !slices.Equal(g, w) {
			t.Fatalf("iteration %d Scan(%+v after=%+v)\n got: %q\nwant: %q", i, req, req.After, g, w)
		}
	}
}

func cellKey(c store.Cell) string {
	return fmt.Sprintf("%q %q %q %d", c.Row, c.Column.Family, c.Column.Qualifier, c.Ts)
}
