package store_test

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
)

var ctx = context.Background()

// quietLogger drops everything below warnings so test output stays readable.
var quietLogger = slog.New(slog.NewTextHandler(testWriter{}, &slog.HandlerOptions{Level: slog.LevelWarn}))

type testWriter struct{}

func (testWriter) Write(p []byte) (int, error) { fmt.Print(string(p)); return len(p), nil }

// The tests' second locality group: a family kept apart from the rest, as
// the transaction framework keeps its notifications.
const (
	sideFamily = "side"
	sideGroup  = "side"
)

// memOptions returns options for an in-memory store on fs, with
// sideFamily in sideGroup.
func memOptions(fs vfs.FS) *store.Options {
	return &store.Options{FS: fs, Logger: quietLogger, Durability: store.DurabilityNone, Groups: map[string]string{sideFamily: sideGroup}}
}

// openMem opens a fresh in-memory store closed at the end of the test.
func openMem(t testing.TB, opts *store.Options) *store.DB {
	t.Helper()
	if opts == nil {
		opts = memOptions(vfs.NewMem())
	}
	db, err := store.Open("db", opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

func col(f, q string) store.Column { return store.Column{Family: f, Qualifier: q} }

// put writes one cell unconditionally.
func put(t testing.TB, db store.Store, table string, row []byte, c store.Column, ts uint64, value string) {
	t.Helper()
	res, err := db.Apply(ctx, &store.RowTxn{Table: table, Row: row,
		Mutations: []store.Mutation{{Column: c, Ts: ts, Value: []byte(value)}}})
	if err != nil || !res.Applied {
		t.Fatalf("put %s/%q/%s@%d: %+v %v", table, row, c, ts, res, err)
	}
}

// collect drains a scan.
func collect(t testing.TB, seq func(func(store.Cell, error) bool)) ([]store.Cell, error) {
	t.Helper()
	var out []store.Cell
	for c, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

func mustCollect(t testing.TB, db store.Store, req store.ScanRequest) []store.Cell {
	t.Helper()
	out, err := collect(t, db.Scan(ctx, req))
	if err != nil {
		t.Fatalf("Scan(%+v): %v", req, err)
	}
	return out
}

func cellString(c store.Cell) string {
	return fmt.Sprintf("%q/%s@%d=%q", c.Row, c.Column, c.Ts, c.Value)
}

func cellsString(cs []store.Cell) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = cellString(c)
	}
	return out
}

func assertCells(t testing.TB, got, want []store.Cell) {
	t.Helper()
	g, w := cellsString(got), cellsString(want)
	if !slices.Equal(g, w) {
		t.Fatalf("cells differ\n got: %q\nwant: %q", g, w)
	}
}

// model is a naive reference implementation of the store's read semantics
// for one table and one group: a flat list of cells.
type model []store.Cell

func (m model) sorted() model {
	s := slices.Clone(m)
	slices.SortFunc(s, func(a, b store.Cell) int {
		if c := bytes.Compare(a.Row, b.Row); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Column.Family, b.Column.Family); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Column.Qualifier, b.Column.Qualifier); c != 0 {
			return c
		}
		return cmp.Compare(b.Ts, a.Ts)
	})
	return s
}

// versions returns the versions of one column selected by spans, in span
// order, newest first within a span.
func (m model) versions(row []byte, c store.Column, spans []store.Span) []store.Cell {
	if len(spans) == 0 {
		spans = []store.Span{store.AllVersions}
	}
	var all []store.Cell
	for _, x := range m.sorted() {
		if bytes.Equal(x.Row, row) && x.Column == c {
			all = append(all, x)
		}
	}
	var out []store.Cell
	for _, sp := range spans {
		n := 0
		for _, x := range all {
			if x.Ts >= sp.MinTs && x.Ts <= sp.MaxTs && (sp.Limit == 0 || n < sp.Limit) {
				out = append(out, x)
				n++
			}
		}
	}
	return out
}

func (m model) readRow(row []byte, cols []store.Column, spans []store.Span) []store.Cell {
	var out []store.Cell
	for _, c := range cols {
		out = append(out, m.versions(row, c, spans)...)
	}
	return out
}

// scan models a ScanRequest (Table and Group are the model's own).
func (m model) scan(req store.ScanRequest) []store.Cell {
	var out []store.Cell
	type rc struct {
		row string
		col store.Column
	}
	seen := map[rc]bool{}
	for _, x := range m.sorted() {
		k := rc{string(x.Row), x.Column}
		if seen[k] {
			continue
		}
		seen[k] = true
		if req.Start != nil && bytes.Compare(x.Row, req.Start) < 0 || req.End != nil && bytes.Compare(x.Row, req.End) >= 0 {
			continue
		}
		if a := req.After; a != nil {
			if c := bytes.Compare(x.Row, a.Row); c < 0 || c == 0 && colCompare(x.Column, a.Column) <= 0 {
				continue
			}
		}
		f := req.Filter
		if len(f.Families)+len(f.Columns) > 0 && !slices.Contains(f.Families, x.Column.Family) && !slices.Contains(f.Columns, x.Column) {
			continue
		}
		out = append(out, m.versions(x.Row, x.Column, req.Spans)...)
	}
	return out
}

func colCompare(a, b store.Column) int {
	if c := cmp.Compare(a.Family, b.Family); c != 0 {
		return c
	}
	return cmp.Compare(a.Qualifier, b.Qualifier)
}
