package store_test

import (
	"errors"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// TestInvalidInputs checks that malformed requests fail with an
// *InvalidError naming the operation and the offending field, and write
// nothing.
func TestInvalidInputs(t *testing.T) {
	db := openMem(t, nil)
	row := []byte("r")
	ok := col("f", "q")
	apply := func(txn *store.RowTxn) error { _, err := db.Apply(ctx, txn); return err }
	read := func(table string, row []byte, cols []store.Column, spans []store.Span) error {
		_, err := db.ReadRow(ctx, table, row, cols, spans)
		return err
	}
	scan := func(req store.ScanRequest) error {
		_, err := collect(t, db.Scan(ctx, req))
		return err
	}
	tests := []struct {
		name, op, field string
		err             error
	}{
		{"apply nil", "Apply", "txn", apply(nil)},
		{"apply empty table", "Apply", "Table", apply(&store.RowTxn{Row: row})},
		{"apply empty row", "Apply", "Row", apply(&store.RowTxn{Table: "t", Row: []byte{}})},
		{"apply check family", "Apply", "Checks[1].Column", apply(&store.RowTxn{Table: "t", Row: row,
			Checks: []store.Check{{Column: ok, MaxTs: 1}, {MaxTs: 1}}})},
		{"apply check range", "Apply", "Checks[0]", apply(&store.RowTxn{Table: "t", Row: row,
			Checks: []store.Check{{Column: ok, MinTs: 2, MaxTs: 1}}})},
		{"apply check presence", "Apply", "Checks[0].Expect", apply(&store.RowTxn{Table: "t", Row: row,
			Checks: []store.Check{{Column: ok, MaxTs: 1, Expect: 9}}})},
		{"apply mutation family", "Apply", "Mutations[0].Column", apply(&store.RowTxn{Table: "t", Row: row,
			Mutations: []store.Mutation{{Column: col("", "q")}}})},
		{"read empty table", "ReadRow", "table", read("", row, []store.Column{ok}, nil)},
		{"read nil row", "ReadRow", "row", read("t", nil, []store.Column{ok}, nil)},
		{"read empty family", "ReadRow", "cols[0]", read("t", row, []store.Column{{}}, nil)},
		{"read span range", "ReadRow", "spans[0]", read("t", row, []store.Column{ok}, []store.Span{{MinTs: 5, MaxTs: 4}})},
		{"read span limit", "ReadRow", "spans[0].Limit", read("t", row, []store.Column{ok}, []store.Span{{MaxTs: 4, Limit: -1}})},
		{"read span overlap", "ReadRow", "spans[1]", read("t", row, []store.Column{ok}, []store.Span{{MinTs: 5, MaxTs: 9}, {MaxTs: 5}})},
		{"scan empty table", "Scan", "Table", scan(store.ScanRequest{})},
		{"scan unknown group", "Scan", "Group", scan(store.ScanRequest{Table: "t", Group: "nope"})},
		{"scan filter group", "Scan", "Filter.Columns[0].Family", scan(store.ScanRequest{Table: "t",
			Filter: store.ColumnFilter{Columns: []store.Column{col(sideFamily, "")}}})},
		{"scan filter empty", "Scan", "Filter.Families[0]", scan(store.ScanRequest{Table: "t",
			Filter: store.ColumnFilter{Families: []string{""}}})},
		{"scan after row", "Scan", "After.Row", scan(store.ScanRequest{Table: "t", After: &store.Position{Column: ok}})},
		{"scan spans", "Scan", "Spans[0]", scan(store.ScanRequest{Table: "t", Spans: []store.Span{{MinTs: 1}}})},
	}
	for _, tc := range tests {
		var ie *store.InvalidError
		if !errors.As(tc.err, &ie) || !errors.Is(tc.err, store.ErrInvalid) {
			t.Errorf("%s: err = %v, want *InvalidError", tc.name, tc.err)
			continue
		}
		if ie.Op != tc.op || ie.Field != tc.field {
			t.Errorf("%s: got op %q field %q, want %q %q (%v)", tc.name, ie.Op, ie.Field, tc.op, tc.field, ie)
		}
	}
	if tables, err := db.Tables(ctx, ""); err != nil || len(tables) != 0 {
		t.Fatalf("invalid requests wrote tables %q (%v)", tables, err)
	}
}
