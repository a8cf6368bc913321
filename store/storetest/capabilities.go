package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// testCapabilities runs the cases of every optional capability the opened
// store claims (see store.AtomicApplier and the others). A store may
// claim one it cannot serve now (a store that forwards to another, a
// service without an oracle): it answers with errors.ErrUnsupported, and
// the case is skipped, saying so.
func testCapabilities(t *testing.T, open Opener) {
	probe := open(t)
	probe.Close()
	if _, ok := probe.(store.AtomicApplier); ok {
		t.Run("ApplyAtomic", func(t *testing.T) { testApplyAtomic(t, open) })
	}
	if _, ok := probe.(store.Ingester); ok {
		t.Run("Ingest", func(t *testing.T) { testIngest(t, open) })
	}
	if _, ok := probe.(store.TableCompacter); ok {
		t.Run("CompactTable", func(t *testing.T) { testCompactTable(t, open) })
	}
	if _, ok := probe.(store.TimestampReader); ok {
		t.Run("ReadRowsNow", func(t *testing.T) { testReadRowsNow(t, open) })
	}
	if _, ok := probe.(store.TimestampApplier); ok {
		t.Run("ApplyNow", func(t *testing.T) { testApplyNow(t, open) })
	}
}

// openSub opens a store under test, closed when t ends.
func openSub(t *testing.T, open Opener) store.Store {
	st := open(t)
	t.Cleanup(func() { st.Close() })
	return st
}

// unsupported skips t if err says the store cannot serve the call now.
func unsupported(t *testing.T, what string, err error) {
	t.Helper()
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("%s: the store cannot now: %v", what, err)
	}
}

// clock is a store.Clock that counts its draws.
type clock struct {
	ts    uint64
	draws int
}

func (c *clock) Timestamp(context.Context) (uint64, error) {
	c.draws++
	c.ts += 1000
	return c.ts, nil
}

var capCol = store.Column{Family: "f", Qualifier: "q"}

// write is a row transaction writing v at ts into (t, row), failing if the
// row holds a lock cell (f:lock) — a check to make fail.
func write(row string, ts uint64, v string) *store.RowTxn {
	return &store.RowTxn{Table: "cap", Row: []byte(row),
		Checks:    []store.Check{{Column: store.Column{Family: "f", Qualifier: "lock"}, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{{Column: capCol, Ts: ts, Value: []byte(v)}}}
}

// readCell reads (cap, row)'s versions of f:q.
func readCell(t *testing.T, st store.Store, row string) []store.Cell {
	t.Helper()
	cells, err := st.ReadRow(bg, "cap", []byte(row), []store.Column{capCol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cells
}

// ApplyAtomic writes every row or none: a failed check anywhere writes
// nothing; otherwise the relative mutations land at their Ts plus the
// timestamp the call returns.
func testApplyAtomic(t *testing.T, open Opener) {
	st := openSub(t, open)
	a := st.(store.AtomicApplier)
	locked := &store.RowTxn{Table: "cap", Row: []byte("b"), Mutations: []store.Mutation{{Column: store.Column{Family: "f", Qualifier: "lock"}, Ts: 1, Value: []byte("x")}}}
	if _, err := st.Apply(bg, locked); err != nil {
		t.Fatal(err)
	}
	c := &clock{}
	_, res, err := a.ApplyAtomic(bg, []*store.RowTxn{write("a", 5, "v"), write("b", 5, "v")}, []int{1, 0}, c)
	unsupported(t, "ApplyAtomic", err)
	if err != nil || len(res) != 2 || res[0].Applied || res[1].Applied || res[1].FailedCheck != 0 {
		t.Fatalf("ApplyAtomic with a failing check: %+v, %v; want nothing applied, row b's check 0 failed", res, err)
	}
	if got := readCell(t, st, "a"); len(got) != 0 {
		t.Fatalf("a failed ApplyAtomic wrote row a: %v", got)
	}
	ts, res, err := a.ApplyAtomic(bg, []*store.RowTxn{write("a", 5, "va"), write("c", 7, "vc")}, []int{1, 0}, c)
	if err != nil || len(res) != 2 || !res[0].Applied || !res[1].Applied || ts == 0 {
		t.Fatalf("ApplyAtomic: %d, %+v, %v; want both applied at a drawn timestamp", ts, res, err)
	}
	if got := readCell(t, st, "a"); len(got) != 1 || got[0].Ts != 5+ts || string(got[0].Value) != "va" {
		t.Fatalf("row a: %v; want va at 5 plus the timestamp %d", got, ts)
	}
	if got := readCell(t, st, "c"); len(got) != 1 || got[0].Ts != 7 {
		t.Fatalf("row c: %v; want its mutation at 7 (not relative)", got)
	}
	if _, _, err := a.ApplyAtomic(bg, []*store.RowTxn{write("a", 1, "v"), write("a", 2, "v")}, []int{0, 0}, c); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("ApplyAtomic of one row twice: %v, want an invalid request", err)
	}
}

// Ingest writes plain row transactions that then read as written.
func testIngest(t *testing.T, open Opener) {
	st := openSub(t, open)
	ing := st.(store.Ingester)
	txns := []*store.RowTxn{
		{Table: "cap", Row: []byte("a"), Mutations: []store.Mutation{{Column: capCol, Ts: 3, Value: []byte("a3")}, {Column: capCol, Ts: 2, Value: []byte("a2")}}},
		{Table: "cap", Row: []byte("b"), Mutations: []store.Mutation{{Column: capCol, Ts: 1, Value: []byte("b1")}}},
	}
	err := ing.Ingest(bg, txns)
	unsupported(t, "Ingest", err)
	if err != nil {
		t.Fatal(err)
	}
	if got := readCell(t, st, "a"); len(got) != 2 || string(got[0].Value) != "a3" || string(got[1].Value) != "a2" {
		t.Fatalf("row a after Ingest: %v", got)
	}
	if got := readCell(t, st, "b"); len(got) != 1 || string(got[0].Value) != "b1" {
		t.Fatalf("row b after Ingest: %v", got)
	}
	if err := ing.Ingest(bg, nil); err != nil {
		t.Fatalf("an empty Ingest: %v", err)
	}
}

// CompactTable keeps what a table reads, and refuses an unknown group.
func testCompactTable(t *testing.T, open Opener) {
	st := openSub(t, open)
	c := st.(store.TableCompacter)
	for i, v := range []string{"v1", "v2", "v3"} {
		if _, err := st.Apply(bg, write("a", uint64(i+1), v)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Apply(bg, &store.RowTxn{Table: "cap", Row: []byte("a"), Mutations: []store.Mutation{{Column: capCol, Ts: 2, Delete: true}}}); err != nil {
		t.Fatal(err)
	}
	before := readCell(t, st, "a")
	err := c.CompactTable(bg, store.DefaultGroup, "cap")
	unsupported(t, "CompactTable", err)
	if err != nil {
		t.Fatal(err)
	}
	if err := CellsEqual(before, readCell(t, st, "a")); err != nil {
		t.Fatalf("after CompactTable: %v", err)
	}
	if err := c.CompactTable(bg, "no such group", "cap"); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("CompactTable of an unknown group: %v, want an invalid request", err)
	}
}

// ReadRowsNow reads at a timestamp it draws and returns: a version written
// at a timestamp the bound marked relative reaches is read.
func testReadRowsNow(t *testing.T, open Opener) {
	st := openSub(t, open)
	if _, err := st.Apply(bg, write("a", 5, "v")); err != nil {
		t.Fatal(err)
	}
	reads := []store.RowRead{{Table: "cap", Row: []byte("a"), Columns: []store.Column{capCol}, Spans: []store.Span{{MaxTs: 0, MinTs: 0}}}}
	ts, res, err := st.(store.TimestampReader).ReadRowsNow(bg, reads, 1)
	unsupported(t, "ReadRowsNow", err)
	if err != nil || ts < 5 || len(res) != 1 || len(res[0]) != 1 || string(res[0][0].Value) != "v" {
		t.Fatalf("ReadRowsNow: %d, %v, %v; want the version at 5 read at a drawn timestamp", ts, res, err)
	}
}

// ApplyNow applies at a timestamp it draws and returns.
func testApplyNow(t *testing.T, open Opener) {
	st := openSub(t, open)
	txn := write("a", 0, "v")
	ts, res, err := st.(store.TimestampApplier).ApplyNow(bg, txn, 1)
	unsupported(t, "ApplyNow", err)
	if err != nil || !res.Applied || ts == 0 {
		t.Fatalf("ApplyNow: %d, %+v, %v", ts, res, err)
	}
	if got := readCell(t, st, "a"); len(got) != 1 || got[0].Ts != ts {
		t.Fatalf("row a after ApplyNow: %v; want its mutation at the drawn timestamp %d", got, ts)
	}
}
