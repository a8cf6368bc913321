package percolator

import (
	"context"
	"reflect"
	"testing"
)

// The published columns come back with their observers' names, in a
// stable order.
func TestPublishedColumnsNameTheirObservers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cols := []ObservedColumn{
		{Table: "t", Column: colB, Kind: Weak, Observer: "b"},
		{Table: "t", Column: colA, Kind: Strong, Observer: "a"},
		{Table: "s", Column: colA, Kind: Strong, Observer: "a"},
	}
	if err := PublishObserved(ctx, e.st, cols, nil); err != nil {
		t.Fatal(err)
	}
	ps, err := LoadObserved(ctx, e.st)
	if err != nil {
		t.Fatal(err)
	}
	want := []ObservedColumn{cols[2], cols[1], cols[0]}
	if got := ps.Columns(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Columns() = %+v, want %+v", got, want)
	}
}
