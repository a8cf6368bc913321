package published

import (
	"context"
	"reflect"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

var (
	colA = store.Column{Family: "f", Qualifier: "a"}
	colB = store.Column{Family: "f", Qualifier: "b"}
)

func memStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open("", protocol.StoreOptions(&store.Options{FS: vfs.NewMem()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// The published columns come back with their observers' names, in a
// stable order.
func TestPublishedColumnsNameTheirObservers(t *testing.T) {
	st := memStore(t)
	ctx := context.Background()
	cols := []Column{
		{Table: "t", Column: colB, Kind: engine.Weak, Observer: "b"},
		{Table: "t", Column: colA, Kind: engine.Strong, Observer: "a"},
		{Table: "s", Column: colA, Kind: engine.Strong, Observer: "a"},
	}
	if err := Replace(ctx, st, cols, nil); err != nil {
		t.Fatal(err)
	}
	ps, err := Load(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	want := []Column{cols[2], cols[1], cols[0]}
	if got := ps.Columns(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Columns() = %+v, want %+v", got, want)
	}
}

// A column's kind in a union is the first observing set's.
func TestUnionTakesTheFirstSetThatObserves(t *testing.T) {
	st := memStore(t)
	ctx := context.Background()
	if err := Replace(ctx, st, []Column{{Table: "t", Column: colA, Kind: engine.Weak, Observer: "a"}}, []Guarded{{"t", "g"}}); err != nil {
		t.Fatal(err)
	}
	ps, err := Load(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !ps.Guarded("t", "g") || ps.Guarded("t", "f") {
		t.Fatalf("Guarded: t/g %v, t/f %v; want only t/g", ps.Guarded("t", "g"), ps.Guarded("t", "f"))
	}
	u := Union(nil, strongA{}, ps)
	if k, ok := u.ObservedKind("t", colA); !ok || k != engine.Strong {
		t.Fatalf("union's kind of t/a = %v, %v; want the first set's, strong", k, ok)
	}
	if _, ok := Union(ps).ObservedKind("t", colB); ok {
		t.Fatal("t/b is observed by nobody, but the union says it is")
	}
}

type strongA struct{}

func (strongA) ObservedKind(table string, col store.Column) (engine.Kind, bool) {
	return engine.Strong, table == "t" && col == colA
}
