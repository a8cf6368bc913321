package store_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
)

// applyModel is a naive reference for Apply over one table in every group:
// a set of cells keyed by cellKey.
type applyModel map[string]store.Cell

// matches returns the cells a check selects, newest first.
func (m applyModel) matches(row []byte, chk store.Check) []store.Cell {
	var out []store.Cell
	for _, c := range m {
		if bytes.Equal(c.Row, row) && c.Column == chk.Column && c.Ts >= chk.MinTs && c.Ts <= chk.MaxTs &&
			(chk.ValuePrefix == nil || bytes.HasPrefix(c.Value, chk.ValuePrefix)) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b store.Cell) int { return int(b.Ts) - int(a.Ts) })
	return out
}

// apply evaluates txn like the store and applies it if its checks hold.
func (m applyModel) apply(txn *store.RowTxn) store.RowResult {
	for i, chk := range txn.Checks {
		found := m.matches(txn.Row, chk)
		if (len(found) > 0) != (chk.Expect == store.MustExist) {
			res := store.RowResult{FailedCheck: i}
			if chk.Expect == store.MustBeAbsent {
				res.Conflict = &found[0]
			}
			return res
		}
	}
	// Conditional mutations look at the row as it was before the txn.
	before := make(map[string]store.Cell, len(m))
	for k, c := range m {
		before[k] = c
	}
	for _, mu := range txn.Mutations {
		c := store.Cell{Row: txn.Row, Column: mu.Column, Ts: mu.Ts, Value: mu.Value}
		k := cellKey(c)
		if mu.IfValuePrefix != nil {
			if old, ok := before[k]; !ok || !bytes.HasPrefix(old.Value, mu.IfValuePrefix) {
				continue
			}
		}
		if mu.Delete {
			delete(m, k)
		} else {
			if c.Value == nil {
				c.Value = []byte{}
			}
			m[k] = c
		}
	}
	return store.RowResult{Applied: true, FailedCheck: -1}
}

// group returns the model's cells of the families in fams, as a model.
func (m applyModel) group(fams ...string) model {
	var out model
	for _, c := range m {
		if slices.Contains(fams, c.Column.Family) {
			out = append(out, c)
		}
	}
	return out
}

// TestModelWithManySSTables runs random row transactions (checks of every
// kind, across groups, with value prefixes and conditional mutations) and
// reads against a store whose data is spread over many flushed sstables, L0
// sublevels and compacted levels, and requires every result to match the
// model. It guards the comparer's Split, the bloom filters and the prefix
// seeks: a key hidden by a wrong filter or prefix decision shows up as a
// missing cell or a wrong check outcome.
func TestModelWithManySSTables(t *testing.T) {
	t.Run("auto-compactions", func(t *testing.T) { testModelWithSSTables(t, openMem(t, nil), 1) })
	t.Run("deep-L0", func(t *testing.T) {
		db, err := store.OpenWithoutCompactions("db", memOptions(vfs.NewMem()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		testModelWithSSTables(t, db, 30)
	})
}

// testModelWithSSTables is TestModelWithManySSTables on db, which must end
// up with at least minL0 sstables in L0 at some point.
func testModelWithSSTables(t *testing.T, db *store.DB, minL0 int64) {
	rng := rand.New(rand.NewPCG(7, 11))
	rows := [][]byte{[]byte("a"), []byte("a\x00"), []byte("a\x00\x01"), []byte("b"), {0xFF}, {0x00}}
	// Families of the default group, and the notify family (its own group).
	cols := []store.Column{col("f", ""), col("f", "q"), col("f", "q\x00"), col("g", "q"),
		col("g\x00", ""), col(sideFamily, "f:q")}
	defaultCols := cols[:len(cols)-1]
	values := []string{"", "lock:1", "lock:2", "write:1", "x", "x\x00y"}
	randValue := func() []byte { return []byte(values[rng.IntN(len(values))]) }
	randPrefix := func() []byte {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		v := randValue()
		return v[:rng.IntN(len(v)+1)]
	}
	randRange := func() (lo, hi uint64) {
		hi = uint64(rng.IntN(24))
		if rng.IntN(3) == 0 {
			return hi, hi // one exact version: Get
		}
		return hi - uint64(rng.IntN(int(hi)+1)), hi
	}
	m := applyModel{}
	// Noise in other tables that must never show up.
	for _, tb := range []string{"s", "u"} {
		for _, r := range rows {
			put(t, db, tb, r, col("f", "q"), 5, "other table")
		}
	}
	var maxTables, maxL0 int64
	for i := range 1200 {
		row := rows[rng.IntN(len(rows))]
		txn := &store.RowTxn{Table: "t", Row: row, NoSync: rng.IntN(2) == 0}
		for range rng.IntN(4) {
			lo, hi := randRange()
			c := store.Check{Column: cols[rng.IntN(len(cols))], MinTs: lo, MaxTs: hi, ValuePrefix: randPrefix(),
				Expect: store.Presence(rng.IntN(2))}
			// Chains like a prewrite's: same column, older versions.
			if n := len(txn.Checks); n > 0 && rng.IntN(2) == 0 && txn.Checks[n-1].MinTs > 0 {
				c.Column = txn.Checks[n-1].Column
				c.MaxTs = txn.Checks[n-1].MinTs - 1
				c.MinTs = c.MaxTs - uint64(rng.IntN(int(c.MaxTs)+1))
			}
			txn.Checks = append(txn.Checks, c)
		}
		for range 1 + rng.IntN(3) {
			mu := store.Mutation{Column: cols[rng.IntN(len(cols))], Ts: uint64(rng.IntN(24))}
			switch rng.IntN(4) {
			case 0:
				mu.Delete = true
			case 1:
				mu.IfValuePrefix = randPrefix()
				mu.Delete = rng.IntN(2) == 0
			}
			if !mu.Delete {
				mu.Value = randValue()
			}
			txn.Mutations = append(txn.Mutations, mu)
		}
		want := m.apply(txn)
		got, err := db.Apply(ctx, txn)
		if err != nil {
			t.Fatal(err)
		}
		wc, gc := "", ""
		if want.Conflict != nil {
			wc = cellString(*want.Conflict)
		}
		if got.Conflict != nil {
			gc = cellString(*got.Conflict)
		}
		if got.Applied != want.Applied || got.FailedCheck != want.FailedCheck || gc != wc {
			t.Fatalf("op %d: Apply(%+v)\n got %+v %s\nwant %+v %s", i, txn, got, gc, want, wc)
		}

		// Reads of the default group, and of the notify group.
		var rc []store.Column
		for range 1 + rng.IntN(3) {
			rc = append(rc, defaultCols[rng.IntN(len(defaultCols))])
		}
		var spans []store.Span
		if rng.IntN(2) == 0 {
			lo, hi := randRange()
			spans = append(spans, store.Span{MinTs: lo, MaxTs: hi, Limit: rng.IntN(3)})
			if lo > 0 && rng.IntN(2) == 0 {
				spans = append(spans, store.Span{MaxTs: lo - 1, Limit: rng.IntN(3)})
			}
		}
		gotCells, err := db.ReadRow(ctx, "t", row, rc, spans)
		if err != nil {
			t.Fatal(err)
		}
		assertModelCells(t, fmt.Sprintf("op %d: ReadRow(%q, %v, %+v)", i, row, rc, spans),
			gotCells, m.group("f", "g", "g\x00").readRow(row, rc, spans))
		notify := []store.Column{cols[len(cols)-1]}
		gotCells, err = db.ReadRow(ctx, "t", row, notify, spans[:min(len(spans), 1)])
		if err != nil {
			t.Fatal(err)
		}
		assertModelCells(t, fmt.Sprintf("op %d: ReadRow(notify)", i), gotCells,
			m.group(sideFamily).readRow(row, notify, spans[:min(len(spans), 1)]))

		if i%50 == 49 {
			req := store.ScanRequest{Table: "t", Spans: spans}
			if rng.IntN(2) == 0 {
				req.Filter.Families = []string{"g"}
			}
			assertModelCells(t, fmt.Sprintf("op %d: Scan(%+v)", i, req), mustCollect(t, db, req),
				m.group("f", "g", "g\x00").scan(req))
		}
		switch {
		case i%500 == 499:
			if err := store.CompactAll(db); err != nil {
				t.Fatal(err)
			}
		case i%12 == 11:
			if err := store.Flush(db); err != nil {
				t.Fatal(err)
			}
			total, l0 := store.TableCount(db)
			maxTables, maxL0 = max(maxTables, total), max(maxL0, l0)
		}
	}
	if maxL0 < minL0 {
		t.Fatalf("at most %d sstables (%d in L0), want %d in L0", maxTables, maxL0, minL0)
	}
	t.Logf("up to %d sstables, %d in L0", maxTables, maxL0)
}

func assertModelCells(t *testing.T, what string, got, want []store.Cell) {
	t.Helper()
	if g, w := cellsString(got), cellsString(want); !slices.Equal(g, w) {
		t.Fatalf("%s\n got: %q\nwant: %q", what, g, w)
	}
}

// TestManyL0SSTables reads a column whose versions are spread over many L0
// sstables, most of which do not hold the column at all, and checks that
// ReadRow and Apply see exactly the right versions.
func TestManyL0SSTables(t *testing.T) {
	db, err := store.OpenWithoutCompactions("db", memOptions(vfs.NewMem()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := col("f", "q")
	for i := range 40 {
		// Each flush holds one version of "hot" and a column of some other
		// row, so every sstable spans the hot row's key range.
		put(t, db, "t", []byte("hot"), c, uint64(100+i), fmt.Sprint("v", i))
		put(t, db, "t", []byte(fmt.Sprintf("a%02d", i)), c, 1, "cold")
		put(t, db, "t", []byte(fmt.Sprintf("z%02d", i)), c, 1, "cold")
		if i%2 == 0 {
			put(t, db, "t", []byte("hot"), col("f", "other"), uint64(i), "x")
		}
		if err := store.Flush(db); err != nil {
			t.Fatal(err)
		}
	}
	if _, l0 := store.TableCount(db); l0 < 40 {
		t.Fatalf("%d sstables in L0, want 40", l0)
	}
	got, err := db.ReadRow(ctx, "t", []byte("hot"), []store.Column{c}, []store.Span{{MinTs: 110, MaxTs: 120, Limit: 2}, {MaxTs: 105, MinTs: 104}})
	if err != nil {
		t.Fatal(err)
	}
	if g := cellsString(got); !slices.Equal(g, []string{`"hot"/f:q@120="v20"`, `"hot"/f:q@119="v19"`,
		`"hot"/f:q@105="v5"`, `"hot"/f:q@104="v4"`}) {
		t.Fatalf("ReadRow = %q", g)
	}
	res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("hot"),
		Checks: []store.Check{
			{Column: c, MinTs: 139, MaxTs: 139, ValuePrefix: []byte("v39"), Expect: store.MustExist},
			{Column: c, MinTs: 0, MaxTs: 99, Expect: store.MustBeAbsent},
			{Column: c, MinTs: 100, MaxTs: 100, Expect: store.MustBeAbsent},
		},
		Mutations: []store.Mutation{{Column: c, Ts: 139, Delete: true, IfValuePrefix: []byte("v3")}}})
	if err != nil || res.Applied || res.FailedCheck != 2 || res.Conflict == nil || cellString(*res.Conflict) != `"hot"/f:q@100="v0"` {
		t.Fatalf("Apply = %+v %v", res, err)
	}
	res, err = db.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("hot"),
		Mutations: []store.Mutation{{Column: c, Ts: 139, Delete: true, IfValuePrefix: []byte("v3")}}})
	if err != nil || !res.Applied {
		t.Fatalf("Apply = %+v %v", res, err)
	}
	got, err = db.ReadRow(ctx, "t", []byte("hot"), []store.Column{c}, []store.Span{{MaxTs: 200, Limit: 1}})
	if err != nil || len(got) != 1 || got[0].Ts != 138 {
		t.Fatalf("after conditional delete: %q %v", cellsString(got), err)
	}
}
