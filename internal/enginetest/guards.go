package enginetest

import (
	"context"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
)

// The guard rule (engine.GuardSet): a transaction that writes a guarded
// cell writes its guard too, or fails with ErrUnguarded having written
// nothing.
var guardRules = []rule{
	{"a guarded cell written with its guard commits", testGuardedWithGuard},
	{"a guarded cell written without its guard fails with ErrUnguarded, having written nothing", testUnguarded},
	{"a guarded cell whose guard is itself guarded fails with ErrUnguarded", testChainedGuard},
	{"a cell of a declared guarded family whose guard the engine does not know fails with ErrUnguarded", testDeclaredGuard},
}

// The guarded families of the guard cases: the cells of family p of row R
// are guarded by R/state:s; those of family q by R/p:g, itself guarded;
// family d is declared guarded, with no guard known.
var (
	stateCol   = engine.Column{Family: "state", Qualifier: "s"}
	postingCol = engine.Column{Family: "p", Qualifier: "x"}
	chainedCol = engine.Column{Family: "q", Qualifier: "x"}
	declCol    = engine.Column{Family: "d", Qualifier: "x"}
)

type guardSet struct{}

func (guardSet) GuardOf(tbl string, row []byte, col engine.Column) (string, []byte, engine.Column, bool) {
	switch {
	case tbl != table:
		return "", nil, engine.Column{}, false
	case col.Family == "p":
		return table, row, stateCol, true
	case col.Family == "q":
		return table, row, engine.Column{Family: "p", Qualifier: "g"}, true
	}
	return "", nil, engine.Column{}, false
}

type declared struct{}

func (declared) Guarded(tbl, family string) bool {
	return tbl == table && (family == "p" || family == "q" || family == "d")
}

func guarded(t *testing.T, h Harness) *deployment {
	return deploy(t, h, engine.Config{Guards: guardSet{}, DeclaredGuards: declared{}})
}

// refused runs a transaction writing cells, once, and checks that it
// fails with ErrUnguarded and leaves nothing.
func refused(t *testing.T, d *deployment, what string, cells ...cell) {
	t.Helper()
	attempts := 0
	err := d.e.Transact(bg, engine.TxnOptions{}, func(_ context.Context, tx engine.Txn) error {
		attempts++
		return put(tx, append([]cell{{"other", colA, "x"}}, cells...)...)
	})
	wantErr(t, what, err, engine.ErrUnguarded)
	if attempts != 1 {
		t.Errorf("%s: the transaction ran %d times, want once", what, attempts)
	}
	for _, c := range append([]cell{{"other", colA, "x"}}, cells...) {
		if v := read(t, d.e, c.row, c.col); v != "-" {
			t.Errorf("%s: %s/%s = %q after the refusal", what, c.row, c.col, v)
		}
	}
}

func testGuardedWithGuard(t *testing.T, h Harness) {
	d := guarded(t, h)
	write(t, d.e, cell{"doc", stateCol, "1"}, cell{"doc", postingCol, "posting"})
	// A deletion of a guarded cell writes the guard too.
	write(t, d.e, cell{"doc", stateCol, "2"}, cell{"doc", postingCol, ""})
	for _, c := range []cell{{"doc", stateCol, "2"}, {"doc", postingCol, "-"}} {
		if v := read(t, d.e, c.row, c.col); v != c.value {
			t.Errorf("%s/%s = %q, want %q", c.row, c.col, v, c.value)
		}
	}
}

func testUnguarded(t *testing.T, h Harness) {
	d := guarded(t, h)
	refused(t, d, "a guarded Set without its guard", cell{"doc", postingCol, "posting"})
	refused(t, d, "a guarded Delete without its guard", cell{"doc", postingCol, ""})
	// Another row's guard does not guard this row's cell.
	refused(t, d, "a guarded cell with another row's guard", cell{"doc2", stateCol, "1"}, cell{"doc", postingCol, "posting"})
}

func testChainedGuard(t *testing.T, h Harness) {
	d := guarded(t, h)
	refused(t, d, "a cell guarded by a guarded cell",
		cell{"doc", stateCol, "1"}, cell{"doc", engine.Column{Family: "p", Qualifier: "g"}, "g"}, cell{"doc", chainedCol, "x"})
}

func testDeclaredGuard(t *testing.T, h Harness) {
	d := guarded(t, h)
	refused(t, d, "a cell of a declared family with no known guard", cell{"doc", declCol, "x"})
	// An engine that knows no guard at all refuses it too.
	e := d.open(t, engine.Config{Observed: observedSet{}, DeclaredGuards: declared{}})
	err := e.Transact(bg, engine.TxnOptions{}, func(_ context.Context, tx engine.Txn) error {
		return put(tx, cell{"doc", stateCol, "1"}, cell{"doc", postingCol, "posting"})
	})
	wantErr(t, "a guarded family's cell written by an engine that knows no guards", err, engine.ErrUnguarded)
}
