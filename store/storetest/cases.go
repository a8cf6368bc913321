package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// Tricky names: separators and the extreme bytes the key encoding escapes.
var (
	tables     = []string{"t", "t\x00", "\xfft", "t\x00\xff"}
	rows       = [][]byte{[]byte("a"), []byte("a\x00"), []byte("a\x00\xff"), {0}, {0xff, 0xff}, []byte("b"), {0, 0}}
	families   = []string{"f", "g\x00", "\xff", SideFamily}
	qualifiers = []string{"", "q", "q\x00", "\xff", "\x00"}
)

func testScripted(t *testing.T, open Opener) {
	p := newPair(t, open)
	lock, data := col("f", "lock"), col("f", "\x00data\xff")
	row := []byte("r\x00\xff")
	// A lock, then a second locker learns who holds it.
	if r := p.apply(&store.RowTxn{Table: "t\x00", Row: row,
		Checks:    []store.Check{{Column: lock, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{{Column: lock, Ts: 10, Value: []byte("owner-1\x00")}, {Column: data, Ts: 10, Value: []byte{0, 0xff}}},
	}); !r.Applied {
		t.Fatalf("first lock: %+v", r)
	}
	r := p.apply(&store.RowTxn{Table: "t\x00", Row: row,
		Checks:    []store.Check{{Column: data, MaxTs: 100, Expect: store.MustExist}, {Column: lock, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{{Column: lock, Ts: 11, Value: []byte("owner-2")}},
	})
	if r.Applied || r.FailedCheck != 1 || r.Conflict == nil || string(r.Conflict.Value) != "owner-1\x00" {
		t.Fatalf("second lock: %+v", r)
	}
	// ValuePrefix checks, matching and not.
	p.apply(&store.RowTxn{Table: "t\x00", Row: row, NoSync: true,
		Checks: []store.Check{{Column: lock, MinTs: 10, MaxTs: 10, ValuePrefix: []byte("owner-1"), Expect: store.MustExist}}})
	if r := p.apply(&store.RowTxn{Table: "t\x00", Row: row,
		Checks: []store.Check{{Column: lock, MinTs: 0, MaxTs: 20, ValuePrefix: []byte("owner-2"), Expect: store.MustExist}}}); r.Applied {
		t.Fatalf("prefix check held: %+v", r)
	}
	p.apply(&store.RowTxn{Table: "t\x00", Row: row,
		Checks: []store.Check{{Column: lock, MaxTs: 20, ValuePrefix: []byte{}, Expect: store.MustBeAbsent}}})
	// IfValuePrefix: a delete that is skipped (not ours), then one that
	// applies (a single delete: the lock was written once); an empty
	// non-nil prefix means "only if it exists".
	p.apply(&store.RowTxn{Table: "t\x00", Row: row, Mutations: []store.Mutation{
		{Column: lock, Ts: 10, Delete: true, IfValuePrefix: []byte("owner-2")},
		{Column: data, Ts: 99, Value: []byte("x"), IfValuePrefix: []byte{}}}})
	p.readRow("t\x00", row, []store.Column{lock, data}, nil)
	p.apply(&store.RowTxn{Table: "t\x00", Row: row, Mutations: []store.Mutation{
		{Column: lock, Ts: 10, Delete: true, SingleDelete: true, IfValuePrefix: []byte("owner-1")},
		{Column: data, Ts: 10, Value: []byte("y"), IfValuePrefix: []byte{0}}}})
	if cells := p.readRow("t\x00", row, []store.Column{lock, data}, nil); len(cells) != 1 || string(cells[0].Value) != "y" {
		t.Fatalf("after conditional mutations: %v", cells)
	}
	// A column with many versions and an empty value, so pages end inside it.
	many := col("f", "many")
	for ts := uint64(1); ts <= 40; ts++ {
		v := []byte(strings.Repeat("v", int(ts%3)))
		p.apply(&store.RowTxn{Table: "t", Row: []byte("m"), Mutations: []store.Mutation{{Column: many, Ts: ts, Value: v}}})
	}
	spanSets := [][]store.Span{nil,
		{{MaxTs: 30, MinTs: 20}},
		{{MaxTs: 35, MinTs: 30, Limit: 4}, {MaxTs: 10, MinTs: 1, Limit: 2}, {MaxTs: 25, MinTs: 12}},
		{{MaxTs: 40, MinTs: 40}},
		{{MaxTs: ^uint64(0), Limit: 1}},
		{{MaxTs: 5, MinTs: 3}, {MaxTs: 39, MinTs: 6, Limit: 30}},
	}
	for _, spans := range spanSets {
		p.readRow("t", []byte("m"), []store.Column{many, many, col("f", "none")}, spans)
		p.scan(store.ScanRequest{Table: "t", Spans: spans})
	}
	// Several rows of two tables in one call, in an order that is not key
	// order, with the same row twice and a read without columns.
	var reads []store.RowRead
	for _, spans := range spanSets {
		reads = append(reads,
			store.RowRead{Table: "t", Row: []byte("m"), Columns: []store.Column{many, col("f", "none")}, Spans: spans},
			store.RowRead{Table: "t\x00", Row: row, Columns: []store.Column{data, lock}, Spans: spans})
	}
	reads = append(reads, store.RowRead{Table: "t", Row: []byte("none")}, reads[0])
	res := p.readRows(reads)
	if len(res[len(res)-2]) != 0 || len(res[1]) != 1 || string(res[1][0].Value) != "y" || len(res[0]) != 40 {
		t.Fatalf("ReadRows: %d results, first %d cells, second %d", len(res), len(res[0]), len(res[1]))
	}
	p.readRows(nil)

	// Prewrites of rows of two tables in one ApplyAll, rows whose table
	// and row bytes concatenate alike among them; the row locked above
	// fails with its lock as the conflict and stops none of the others;
	// a conditional delete and a notification in the side group ride
	// along.
	prewrite := func(table string, row []byte, noSync bool) *store.RowTxn {
		return &store.RowTxn{Table: table, Row: row, NoSync: noSync,
			Checks: []store.Check{{Column: lock, MaxTs: ^uint64(0), Expect: store.MustBeAbsent},
				{Column: data, MinTs: 50, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
			Mutations: []store.Mutation{{Column: lock, Ts: 50, Value: []byte("owner-3")}, {Column: data, Ts: 50, Value: row},
				{Column: col(SideFamily, "n"), Ts: 50}}}
	}
	p.apply(&store.RowTxn{Table: "t\x00", Row: row, Mutations: []store.Mutation{{Column: lock, Ts: 12, Value: []byte("owner-4")}}})
	batch := []*store.RowTxn{
		prewrite("t\x00", []byte{0}, true),
		prewrite("t", []byte{0, 0}, false),
		prewrite("t\x00", row, true),
		prewrite("t", []byte("m"), true),
	}
	batch[3].Mutations = append(batch[3].Mutations, store.Mutation{Column: many, Ts: 40, Delete: true, IfValuePrefix: []byte("v")})
	res2 := p.applyAll(batch)
	if !res2[0].Applied || !res2[1].Applied || res2[2].Applied || res2[2].FailedCheck != 0 ||
		res2[2].Conflict == nil || string(res2[2].Conflict.Value) != "owner-4" || !res2[3].Applied {
		t.Fatalf("ApplyAll of prewrites: %+v", res2)
	}
	got := p.readRows([]store.RowRead{
		{Table: "t\x00", Row: []byte{0}, Columns: []store.Column{lock, data}},
		{Table: "t", Row: []byte{0, 0}, Columns: []store.Column{lock, data}},
		{Table: "t\x00", Row: row, Columns: []store.Column{lock}, Spans: []store.Span{{MinTs: 50, MaxTs: 50}}},
		{Table: "t", Row: []byte("m"), Columns: []store.Column{many}, Spans: []store.Span{{MinTs: 39, MaxTs: 40}}},
	})
	if len(got[0]) != 2 || len(got[1]) != 2 || len(got[2]) != 0 || len(got[3]) != 1 {
		t.Fatalf("after ApplyAll: %v", got)
	}
	p.scan(store.ScanRequest{Table: "t", Group: SideGroup})
	// The same batch again: every check fails now.
	for i, r := range p.applyAll(batch) {
		if r.Applied || r.Conflict == nil {
			t.Fatalf("ApplyAll again: txns[%d]: %+v", i, r)
		}
	}
	p.applyAll(nil)
	p.tables("")
	p.tables(SideGroup)
}

// randomHistory fills both stores with the same random cells over the
// tricky names, with many versions per column: single row transactions
// and batches of them on distinct rows (now and then, an invalid batch
// naming a row twice).
func randomHistory(p *pair, rng *rand.Rand, n int) {
	type rowRef struct {
		table string
		row   []byte
	}
	var refs []rowRef
	for _, table := range tables {
		for _, row := range rows {
			refs = append(refs, rowRef{table, row})
		}
	}
	for range n {
		if rng.IntN(4) > 0 {
			p.apply(randomTxn(rng, tables[rng.IntN(len(tables))], rows[rng.IntN(len(rows))]))
			continue
		}
		rng.Shuffle(len(refs), func(i, j int) { refs[i], refs[j] = refs[j], refs[i] })
		txns := make([]*store.RowTxn, 1+rng.IntN(8))
		for i := range txns {
			txns[i] = randomTxn(rng, refs[i].table, refs[i].row)
		}
		if len(txns) > 1 && rng.IntN(20) == 0 {
			txns[len(txns)-1] = randomTxn(rng, refs[0].table, refs[0].row)
		}
		p.applyAll(txns)
	}
}

// randomTxn builds a random row transaction on (table, row).
func randomTxn(rng *rand.Rand, table string, row []byte) *store.RowTxn {
	txn := &store.RowTxn{Table: table, Row: row, NoSync: rng.IntN(2) == 0}
	for range max(rng.IntN(6)-3, 0) {
		c := store.Check{Column: col(families[rng.IntN(len(families))], qualifiers[rng.IntN(len(qualifiers))]),
			MaxTs: uint64(rng.IntN(60)), Expect: store.Presence(rng.IntN(2))}
		c.MinTs = uint64(rng.IntN(int(c.MaxTs) + 1))
		if rng.IntN(3) == 0 {
			c.ValuePrefix = []byte{byte('a' + rng.IntN(3))}
		}
		txn.Checks = append(txn.Checks, c)
	}
	for range 1 + rng.IntN(5) {
		m := store.Mutation{Column: col(families[rng.IntN(len(families))], qualifiers[rng.IntN(len(qualifiers))]),
			Ts: uint64(1 + rng.IntN(50)), Value: []byte{byte('a' + rng.IntN(3)), 0, 0xff}}
		switch rng.IntN(6) {
		case 0:
			m.Delete = true
		case 1:
			m.IfValuePrefix = []byte{byte('a' + rng.IntN(3))}
		}
		txn.Mutations = append(txn.Mutations, m)
	}
	return txn
}

// randomScan builds a valid scan request (or, rarely, an invalid one) over
// the names randomHistory uses.
func randomScan(rng *rand.Rand) store.ScanRequest {
	req := store.ScanRequest{Table: tables[rng.IntN(len(tables))]}
	fams := []string{"f", "g\x00", "\xff"}
	if rng.IntN(4) == 0 {
		req.Group, fams = SideGroup, []string{SideFamily}
	}
	pick := func() []byte { return rows[rng.IntN(len(rows))] }
	if rng.IntN(3) == 0 {
		req.Start = pick()
	}
	if rng.IntN(3) == 0 {
		req.End = pick()
	}
	if req.Start != nil && rng.IntN(3) == 0 {
		req.End = append(bytes.Clone(req.Start), 0) // the row Start alone
	}
	for range rng.IntN(3) {
		if rng.IntN(2) == 0 {
			req.Filter.Families = append(req.Filter.Families, fams[rng.IntN(len(fams))])
		} else {
			req.Filter.Columns = append(req.Filter.Columns, col(fams[rng.IntN(len(fams))], qualifiers[rng.IntN(len(qualifiers))]))
		}
	}
	switch rng.IntN(4) {
	case 1:
		req.Spans = []store.Span{{MaxTs: 40, MinTs: 10, Limit: rng.IntN(3)}}
	case 2:
		req.Spans = []store.Span{{MaxTs: 20, MinTs: 15, Limit: 1}, {MaxTs: 50, MinTs: 30}, {MaxTs: 10, MinTs: 0, Limit: 2}}
	case 3:
		req.Spans = []store.Span{{MaxTs: ^uint64(0), Limit: 1 + rng.IntN(3)}}
	}
	if rng.IntN(3) == 0 {
		req.After = &store.Position{Row: pick(), Column: col(fams[rng.IntN(len(fams))], qualifiers[rng.IntN(len(qualifiers))])}
	}
	if rng.IntN(40) == 0 {
		req.Spans = append(req.Spans, store.Span{MaxTs: 3, MinTs: 5}) // invalid
	}
	return req
}

func testRandom(t *testing.T, open Opener) {
	p := newPair(t, open)
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 5 {
		randomHistory(p, rng, 150)
		for range 60 {
			p.scan(randomScan(rng))
		}
		for range 60 {
			cols := []store.Column{}
			for range 1 + rng.IntN(4) {
				cols = append(cols, col(families[rng.IntN(3)], qualifiers[rng.IntN(len(qualifiers))]))
			}
			spans := randomScan(rng).Spans
			p.readRow(tables[rng.IntN(len(tables))], rows[rng.IntN(len(rows))], cols, spans)
		}
		for range 20 {
			reads := make([]store.RowRead, rng.IntN(10))
			for i := range reads {
				r := store.RowRead{Table: tables[rng.IntN(len(tables))], Row: rows[rng.IntN(len(rows))], Spans: randomScan(rng).Spans}
				for range rng.IntN(4) {
					r.Columns = append(r.Columns, col(families[rng.IntN(3)], qualifiers[rng.IntN(len(qualifiers))]))
				}
				if rng.IntN(5) == 0 {
					r.Columns = []store.Column{col(SideFamily, qualifiers[rng.IntN(len(qualifiers))])}
				}
				reads[i] = r
			}
			p.readRows(reads)
		}
		p.tables("")
		p.tables(SideGroup)
		t.Logf("round %d: %d cells", round, len(p.scan(store.ScanRequest{Table: "t"})))
	}
}

func testInvalid(t *testing.T, open Opener) {
	p := newPair(t, open)
	ok := col("f", "q")
	type check struct {
		name  string
		field string
		run   func(s store.Store) error
	}
	scanErr := func(s store.Store, req store.ScanRequest) error { _, err := Collect(s.Scan(bg, req)); return err }
	for _, c := range []check{
		{"apply nil", "txn", func(s store.Store) error { _, err := s.Apply(bg, nil); return err }},
		{"apply table", "Table", func(s store.Store) error { _, err := s.Apply(bg, &store.RowTxn{Row: []byte("r")}); return err }},
		{"apply row", "Row", func(s store.Store) error { _, err := s.Apply(bg, &store.RowTxn{Table: "t"}); return err }},
		{"apply check family", "Checks[1].Column", func(s store.Store) error {
			_, err := s.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"), Checks: []store.Check{{Column: ok, MaxTs: 1}, {}}})
			return err
		}},
		{"apply expect", "Checks[0].Expect", func(s store.Store) error {
			_, err := s.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"), Checks: []store.Check{{Column: ok, MaxTs: 1, Expect: 7}}})
			return err
		}},
		{"apply mutation", "Mutations[0].Column", func(s store.Store) error {
			_, err := s.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{}}})
			return err
		}},
		{"applyall nil", "txns[1]", func(s store.Store) error {
			_, err := s.ApplyAll(bg, []*store.RowTxn{{Table: "t", Row: []byte("a")}, nil})
			return err
		}},
		{"applyall nil after an invalid one", "txns[2]", func(s store.Store) error {
			_, err := s.ApplyAll(bg, []*store.RowTxn{{Table: "t", Row: []byte("a")}, {Table: "t"}, nil})
			return err
		}},
		{"applyall duplicate", "txns[2]", func(s store.Store) error {
			_, err := s.ApplyAll(bg, []*store.RowTxn{{Table: "t\x00", Row: []byte{0}}, {Table: "t", Row: []byte{0, 0}}, {Table: "t\x00", Row: []byte{0}}})
			return err
		}},
		{"applyall check", "txns[2].Checks[0].Expect", func(s store.Store) error {
			_, err := s.ApplyAll(bg, []*store.RowTxn{{Table: "t", Row: []byte("a")}, {Table: "t", Row: []byte("b")},
				{Table: "t", Row: []byte("c"), Checks: []store.Check{{Column: ok, MaxTs: 1, Expect: 7}}}})
			return err
		}},
		{"applyall table", "txns[0].Table", func(s store.Store) error {
			_, err := s.ApplyAll(bg, []*store.RowTxn{{Row: []byte("a")}})
			return err
		}},
		{"applyall mutation", "txns[1].Mutations[0].Column", func(s store.Store) error {
			_, err := s.ApplyAll(bg, []*store.RowTxn{{Table: "t", Row: []byte("a")}, {Table: "t", Row: []byte("b"), Mutations: []store.Mutation{{Ts: 1}}}})
			return err
		}},
		{"applyall too many", "txns", func(s store.Store) error {
			txns := make([]*store.RowTxn, store.MaxApplyAll+1)
			for i := range txns {
				txns[i] = &store.RowTxn{Table: "t", Row: fmt.Appendf(nil, "r%d", i)}
			}
			_, err := s.ApplyAll(bg, txns)
			return err
		}},
		{"applyall too many with a nil", "txns", func(s store.Store) error {
			_, err := s.ApplyAll(bg, make([]*store.RowTxn, store.MaxApplyAll+1))
			return err
		}},
		{"readrow spans", "spans[1]", func(s store.Store) error {
			_, err := s.ReadRow(bg, "t", []byte("r"), []store.Column{ok}, []store.Span{{MaxTs: 9, MinTs: 5}, {MaxTs: 6, MinTs: 6}})
			return err
		}},
		{"readrow limit", "spans[0].Limit", func(s store.Store) error {
			_, err := s.ReadRow(bg, "t", []byte("r"), []store.Column{ok}, []store.Span{{MaxTs: 9, Limit: -1}})
			return err
		}},
		{"readrow groups", "cols[1].Family", func(s store.Store) error {
			_, err := s.ReadRow(bg, "t", []byte("r"), []store.Column{ok, col(SideFamily, "")}, nil)
			return err
		}},
		{"readrows column", "reads[3].Columns[0]", func(s store.Store) error {
			good := store.RowRead{Table: "t", Row: []byte("r"), Columns: []store.Column{ok}}
			_, err := s.ReadRows(bg, []store.RowRead{good, good, good, {Table: "t", Row: []byte("r"), Columns: []store.Column{{Qualifier: "q"}}}})
			return err
		}},
		{"readrows groups", "reads[1].Columns[1].Family", func(s store.Store) error {
			_, err := s.ReadRows(bg, []store.RowRead{{Table: "t", Row: []byte("r")},
				{Table: "t", Row: []byte("r"), Columns: []store.Column{ok, col(SideFamily, "")}}})
			return err
		}},
		{"readrows table", "reads[0].Table", func(s store.Store) error {
			_, err := s.ReadRows(bg, []store.RowRead{{Row: []byte("r"), Columns: []store.Column{ok}}})
			return err
		}},
		{"readrows row", "reads[1].Row", func(s store.Store) error {
			_, err := s.ReadRows(bg, []store.RowRead{{Table: "t", Row: []byte("r")}, {Table: "t"}})
			return err
		}},
		{"readrows spans", "reads[0].Spans[1]", func(s store.Store) error {
			_, err := s.ReadRows(bg, []store.RowRead{{Table: "t", Row: []byte("r"), Spans: []store.Span{{MaxTs: 9, MinTs: 5}, {MaxTs: 6, MinTs: 6}}}})
			return err
		}},
		{"readrows limit", "reads[0].Spans[0].Limit", func(s store.Store) error {
			_, err := s.ReadRows(bg, []store.RowRead{{Table: "t", Row: []byte("r"), Spans: []store.Span{{MaxTs: 9, Limit: -2}}}})
			return err
		}},
		{"readrows too many", "reads", func(s store.Store) error {
			reads := make([]store.RowRead, store.MaxRowReads+1)
			for i := range reads {
				reads[i] = store.RowRead{Table: "t", Row: []byte("r")}
			}
			_, err := s.ReadRows(bg, reads)
			return err
		}},
		{"scan group", "Group", func(s store.Store) error { return scanErr(s, store.ScanRequest{Table: "t", Group: "nope"}) }},
		{"scan filter", "Filter.Families[0]", func(s store.Store) error {
			return scanErr(s, store.ScanRequest{Table: "t", Filter: store.ColumnFilter{Families: []string{SideFamily}}})
		}},
		{"scan after", "After.Row", func(s store.Store) error {
			return scanErr(s, store.ScanRequest{Table: "t", After: &store.Position{Column: ok}})
		}},
		{"tables group", "group", func(s store.Store) error { _, err := s.Tables(bg, "nope"); return err }},
	} {
		want := c.run(p.ref)
		got := c.run(p.sub)
		if !errors.Is(got, store.ErrInvalid) || !strings.Contains(got.Error(), c.field) {
			t.Errorf("%s: %v, want ErrInvalid naming %s", c.name, got, c.field)
		}
		var inv *store.InvalidError
		if !errors.As(got, &inv) || inv.Field != c.field {
			t.Errorf("%s: %#v, want an InvalidError for field %s", c.name, got, c.field)
		}
		if err := errorsEqual(want, got); err != nil {
			t.Errorf("%s: reference vs store: %v", c.name, err)
		}
	}
}
