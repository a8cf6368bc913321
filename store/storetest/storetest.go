// Package storetest is the conformance suite of store.Store: every
// implementation (the pebble store, a client of a store in another
// process, the TiKV store) runs it, so that callers can rely on one
// contract whatever store they are given.
//
// The suite runs scripted cases with explicit expectations and a
// randomized history, and it runs every operation both on the store under
// test and on a reference pebble store in memory with the same history,
// failing on any difference in cells, results or error texts.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/internal/keys"
	"github.com/trickle-dev/trickle/store"
)

// The locality groups the suite uses: a store under test must map
// SideFamily to SideGroup (Groups) and every other family to the default
// group.
const (
	SideFamily = "side"
	SideGroup  = "side"
)

// Groups is the family-to-group map of the stores the suite uses, as
// store.Options.Groups. Opener must open stores with it. Do not modify it.
var Groups = map[string]string{SideFamily: SideGroup}

// Opener returns a new, empty store laid out with Groups. The suite closes
// it (it may be closed twice); anything else the opener started it cleans
// up with t.Cleanup.
type Opener func(t *testing.T) store.Store

// Run runs the whole suite on stores that open returns, each subtest on a
// store of its own.
func Run(t *testing.T, open Opener) {
	t.Run("Scripted", func(t *testing.T) { testScripted(t, open) })
	t.Run("Random", func(t *testing.T) { testRandom(t, open) })
	t.Run("Invalid", func(t *testing.T) { testInvalid(t, open) })
	t.Run("Closed", func(t *testing.T) { testClosed(t, open) })
	t.Run("Groups", func(t *testing.T) { testGroups(t, open) })
	t.Run("Capabilities", func(t *testing.T) { testCapabilities(t, open) })
}

var bg = context.Background()

// OpenReference opens the reference store: pebble in memory, laid out with
// Groups, without fsync.
func OpenReference(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open("ref", &store.Options{FS: vfs.NewMem(), Durability: store.DurabilityNone, Groups: Groups,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// pair runs every operation on the reference store and on the store under
// test, and fails the test on any difference.
type pair struct {
	t   *testing.T
	ref *store.DB
	sub store.Store
}

func newPair(t *testing.T, open Opener) *pair {
	sub := open(t)
	t.Cleanup(func() { sub.Close() })
	return &pair{t: t, ref: OpenReference(t), sub: sub}
}

func (p *pair) apply(txn *store.RowTxn) store.RowResult {
	p.t.Helper()
	want, werr := p.ref.Apply(bg, txn)
	got, gerr := p.sub.Apply(bg, txn)
	if err := errorsEqual(werr, gerr); err != nil {
		p.t.Fatalf("Apply(%+v): %v", txn, err)
	}
	if err := resultsEqual(want, got); err != nil {
		p.t.Fatalf("Apply(%+v): reference vs store: %v", txn, err)
	}
	return want
}

func (p *pair) applyAll(txns []*store.RowTxn) []store.RowResult {
	p.t.Helper()
	want, werr := p.ref.ApplyAll(bg, txns)
	got, gerr := p.sub.ApplyAll(bg, txns)
	if err := errorsEqual(werr, gerr); err != nil {
		p.t.Fatalf("ApplyAll(%d row transactions): %v", len(txns), err)
	}
	if len(want) != len(got) {
		p.t.Fatalf("ApplyAll(%d row transactions): %d results from the reference, %d from the store", len(txns), len(want), len(got))
	}
	if werr == nil && len(want) != len(txns) {
		p.t.Fatalf("ApplyAll: %d results for %d row transactions", len(want), len(txns))
	}
	for i := range want {
		if err := resultsEqual(want[i], got[i]); err != nil {
			p.t.Fatalf("ApplyAll txns[%d] (%+v): reference vs store: %v", i, txns[i], err)
		}
	}
	return want
}

func (p *pair) readRow(table string, row []byte, cols []store.Column, spans []store.Span) []store.Cell {
	p.t.Helper()
	want, werr := p.ref.ReadRow(bg, table, row, cols, spans)
	got, gerr := p.sub.ReadRow(bg, table, row, cols, spans)
	if err := errorsEqual(werr, gerr); err != nil {
		p.t.Fatalf("ReadRow(%q, %q, %v, %v): %v", table, row, cols, spans, err)
	}
	if err := CellsEqual(want, got); err != nil {
		p.t.Fatalf("ReadRow(%q, %q, %v, %v): reference vs store: %v", table, row, cols, spans, err)
	}
	return want
}

// readRows compares a ReadRows call, and checks that each result is what
// ReadRow returns for its read.
func (p *pair) readRows(reads []store.RowRead) [][]store.Cell {
	p.t.Helper()
	want, werr := p.ref.ReadRows(bg, reads)
	got, gerr := p.sub.ReadRows(bg, reads)
	if err := errorsEqual(werr, gerr); err != nil {
		p.t.Fatalf("ReadRows(%d reads %v): %v", len(reads), reads, err)
	}
	if len(want) != len(got) {
		p.t.Fatalf("ReadRows(%d reads): %d results from the reference, %d from the store", len(reads), len(want), len(got))
	}
	for i := range want {
		if err := CellsEqual(want[i], got[i]); err != nil {
			p.t.Fatalf("ReadRows(%d reads) result %d (%+v): reference vs store: %v", len(reads), i, reads[i], err)
		}
	}
	if werr == nil {
		if len(want) != len(reads) {
			p.t.Fatalf("ReadRows: %d results for %d reads", len(want), len(reads))
		}
		for i, r := range reads {
			one, err := p.sub.ReadRow(bg, r.Table, r.Row, r.Columns, r.Spans)
			if err != nil {
				p.t.Fatalf("ReadRow(reads[%d]): %v", i, err)
			}
			if err := CellsEqual(one, got[i]); err != nil {
				p.t.Fatalf("ReadRows result %d differs from ReadRow(%+v): %v", i, r, err)
			}
		}
	}
	return want
}

// scan compares a full scan, and a scan resumed with After from every
// few cells of it (as a paging caller does).
func (p *pair) scan(req store.ScanRequest) []store.Cell {
	p.t.Helper()
	want, werr := Collect(p.ref.Scan(bg, req))
	got, gerr := Collect(p.sub.Scan(bg, req))
	if err := errorsEqual(werr, gerr); err != nil {
		p.t.Fatalf("Scan(%+v): %v", req, err)
	}
	if err := CellsEqual(want, got); err != nil {
		p.t.Fatalf("Scan(%+v): reference vs store: %v", req, err)
	}
	if werr == nil && keys.OneRow(req.Start, req.End) {
		// A scan of one row reads a narrower range than others: it must
		// find what a scan of more rows finds in that row.
		wide := req
		wide.End = nil
		all, err := Collect(p.ref.Scan(bg, wide))
		if err != nil {
			p.t.Fatalf("Scan(%+v): %v", wide, err)
		}
		var row []store.Cell
		for _, c := range all {
			if bytes.Equal(c.Row, req.Start) {
				row = append(row, c)
			}
		}
		if err := CellsEqual(row, want); err != nil {
			p.t.Fatalf("Scan(%+v) of one row vs the row in a wider scan: %v", req, err)
		}
	}
	if req.After == nil && len(want) > 1 {
		for _, i := range []int{0, len(want) / 3, len(want) - 2} {
			page := req
			page.After = &store.Position{Row: want[i].Row, Column: want[i].Column}
			p.scan(page)
		}
	}
	return want
}

func (p *pair) tables(group string) []string {
	p.t.Helper()
	want, werr := p.ref.Tables(bg, group)
	got, gerr := p.sub.Tables(bg, group)
	if err := errorsEqual(werr, gerr); err != nil || fmt.Sprintf("%q", want) != fmt.Sprintf("%q", got) {
		p.t.Fatalf("Tables(%q): %q %v vs %q %v", group, want, werr, got, gerr)
	}
	return want
}

func col(f, q string) store.Column { return store.Column{Family: f, Qualifier: q} }

// Collect drains a scan, stopping at the first error.
func Collect(seq func(func(store.Cell, error) bool)) ([]store.Cell, error) {
	var out []store.Cell
	for c, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

// CellsEqual compares cells by content (nil and empty byte slices alike)
// and says where the first difference is.
func CellsEqual(a, b []store.Cell) error {
	if len(a) != len(b) {
		return fmt.Errorf("%d cells vs %d", len(a), len(b))
	}
	for i := range a {
		if err := cellEqual(&a[i], &b[i]); err != nil {
			return fmt.Errorf("cell %d: %w", i, err)
		}
	}
	return nil
}

func cellEqual(a, b *store.Cell) error {
	if !bytes.Equal(a.Row, b.Row) || a.Column != b.Column || a.Ts != b.Ts || !bytes.Equal(a.Value, b.Value) {
		return fmt.Errorf("%s vs %s", FormatCell(a), FormatCell(b))
	}
	return nil
}

// FormatCell renders a cell (or <nil>) for test messages.
func FormatCell(c *store.Cell) string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q/%q@%d=%q", c.Row, c.Column, c.Ts, c.Value)
}

func resultsEqual(a, b store.RowResult) error {
	if a.Applied != b.Applied || a.FailedCheck != b.FailedCheck || (a.Conflict == nil) != (b.Conflict == nil) {
		return fmt.Errorf("%+v (conflict %s) vs %+v (conflict %s)", a, FormatCell(a.Conflict), b, FormatCell(b.Conflict))
	}
	if a.Conflict != nil {
		return cellEqual(a.Conflict, b.Conflict)
	}
	return nil
}

// errorsEqual requires both errors to be nil, or both non-nil with the
// same text.
func errorsEqual(a, b error) error {
	if (a == nil) != (b == nil) || (a != nil && a.Error() != b.Error()) {
		return fmt.Errorf("error %v vs %v", a, b)
	}
	return nil
}

// testClosed requires every operation of a closed store to fail with
// store.ErrClosed, and Close to be idempotent.
func testClosed(t *testing.T, open Opener) {
	s := open(t)
	if _, err := s.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: col("f", "q"), Ts: 1, Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s.Close() // idempotent; its result is the store's to decide
	ok := &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: col("f", "q"), Ts: 2, Value: []byte("v")}}}
	for name, run := range map[string]func() error{
		"Apply":    func() error { _, err := s.Apply(bg, ok); return err },
		"ApplyAll": func() error { _, err := s.ApplyAll(bg, []*store.RowTxn{ok}); return err },
		"ReadRow": func() error {
			_, err := s.ReadRow(bg, "t", []byte("r"), []store.Column{col("f", "q")}, nil)
			return err
		},
		"ReadRows": func() error {
			_, err := s.ReadRows(bg, []store.RowRead{{Table: "t", Row: []byte("r"), Columns: []store.Column{col("f", "q")}}})
			return err
		},
		"Scan":   func() error { _, err := Collect(s.Scan(bg, store.ScanRequest{Table: "t"})); return err },
		"Tables": func() error { _, err := s.Tables(bg, ""); return err },
	} {
		if err := run(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s on a closed store: %v, want store.ErrClosed", name, err)
		}
	}
}

// testGroups requires locality groups to be disjoint: cells of a family in
// SideGroup are scanned and listed there only.
func testGroups(t *testing.T, open Opener) {
	p := newPair(t, open)
	p.apply(&store.RowTxn{Table: "data", Row: []byte("r"), Mutations: []store.Mutation{{Column: col("f", "q"), Ts: 1, Value: []byte("v")}}})
	p.apply(&store.RowTxn{Table: "notes", Row: []byte("r"), Mutations: []store.Mutation{{Column: col(SideFamily, "n"), Ts: 1}}})
	if got := p.tables(""); len(got) != 1 || got[0] != "data" {
		t.Fatalf("Tables(default) = %q, want [data]", got)
	}
	if got := p.tables(SideGroup); len(got) != 1 || got[0] != "notes" {
		t.Fatalf("Tables(side) = %q, want [notes]", got)
	}
	if got := p.scan(store.ScanRequest{Table: "notes"}); len(got) != 0 {
		t.Fatalf("default-group scan of notes: %v", got)
	}
	if got := p.scan(store.ScanRequest{Table: "notes", Group: SideGroup}); len(got) != 1 || len(got[0].Value) != 0 {
		t.Fatalf("side-group scan of notes: %v", got)
	}
}
