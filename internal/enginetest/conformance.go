package enginetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
)

// The conformance suite of engine.Engine: every engine (the protocol over
// a store, TiKV's own transactions) runs the same cases, so that an
// observer behaves the same whichever engine runs it. Each case is a
// subtest named for the rule it checks, on a store of its own. Where two
// engines could answer differently, the rule the suite holds them to is
// the one framework's package doc states ("One contract for every
// engine").

// Harness is what the suite needs of an engine.
type Harness struct {
	// NewStore returns the opener of engines on a new, empty store (or
	// cluster), torn down when t ends.
	NewStore func(t *testing.T) Opener
	// CellLimit is the size of the largest cell (its key and value) the
	// engine takes, 0 if it sets none: a larger one fails with
	// engine.ErrTooLarge.
	CellLimit int
	// NewOutageStore, if set, is NewStore on a store whose timestamps can
	// fail: fail(n) makes the next n timestamps drawn for the engines'
	// transactions fail, as in an outage of the oracle (PD, for TiKV),
	// and fail(0) ends the outage. The cases of a failed timestamp are
	// skipped without it.
	NewOutageStore func(t *testing.T) (open Opener, fail func(n int64))
}

// Opener opens an engine on one store with c, as the front opens one:
// each engine it returns is another process's (its own caches and running
// transactions; the store, its timestamps and its safe point shared). The
// suite sets the fields of c a case needs (Observed, Guards,
// DeclaredGuards, Lease, Notified, MaxAttempts); the opener keeps them
// and fills in the rest as the engine's own tests do. It closes what it
// opened when t ends.
type Opener func(t *testing.T, c engine.Config) engine.Engine

// SplitRows are rows of the suite's tables at which a harness may split
// its store (into regions, say), so that the suite's transactions and
// scans cross the boundaries.
var SplitRows = map[string][][]byte{table: {[]byte("b2"), []byte("c4"), []byte("r2")}}

// rule is one case of the suite: what it checks, and the check.
type rule struct {
	name string
	run  func(t *testing.T, h Harness)
}

// RunConformance runs the whole suite on the engines h opens.
func RunConformance(t *testing.T, h Harness) {
	for _, g := range []struct {
		name  string
		rules []rule
	}{
		{"Reads", readRules},
		{"AsOf", asOfRules},
		{"Writes", writeRules},
		{"Timestamps", timestampRules},
		{"Guards", guardRules},
		{"Lease", leaseRules},
		{"Deadlines", deadlineRules},
		{"Notifications", notificationRules},
	} {
		t.Run(g.name, func(t *testing.T) {
			for _, r := range g.rules {
				t.Run(r.name, func(t *testing.T) { r.run(t, h) })
			}
		})
	}
}

// The suite's cells: table t, where the observed columns are strongCol
// (strongly) and weakCol (weakly); every other column, and every column
// of table u, is unobserved.
const (
	table      = "t"
	otherTable = "u"
)

var (
	colA      = engine.Column{Family: "f", Qualifier: "a"}
	colB      = engine.Column{Family: "f", Qualifier: "b"}
	colG      = engine.Column{Family: "g", Qualifier: "c"}
	strongCol = engine.Column{Family: "s", Qualifier: "x"}
	weakCol   = engine.Column{Family: "w", Qualifier: "x"}
)

// observedSet observes strongCol and weakCol of table t.
type observedSet struct{}

func (observedSet) ObservedKind(tbl string, col engine.Column) (engine.Kind, bool) {
	switch {
	case tbl != table:
		return 0, false
	case col == strongCol:
		return engine.Strong, true
	case col == weakCol:
		return engine.Weak, true
	}
	return 0, false
}

var bg = context.Background()

// deployment is a store and the engine of the process a case runs in.
type deployment struct {
	t    *testing.T
	e    engine.Engine
	open Opener
}

// deploy opens an engine with c on a new store; c.Observed defaults to
// the suite's observed columns.
func deploy(t *testing.T, h Harness, c engine.Config) *deployment {
	t.Helper()
	open := h.NewStore(t)
	if c.Observed == nil {
		c.Observed = observedSet{}
	}
	return &deployment{t: t, e: open(t, c), open: open}
}

// process opens another process's engine on the deployment's store.
func (d *deployment) process() engine.Engine {
	d.t.Helper()
	return d.open(d.t, engine.Config{Observed: observedSet{}})
}

// update runs fn in a read-write transaction of e and fails the case on
// an error.
func update(t *testing.T, e engine.Engine, fn func(context.Context, engine.Txn) error) {
	t.Helper()
	if err := e.Transact(bg, engine.TxnOptions{}, fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

// view runs fn in a read-only transaction of e at at (0: now) and fails
// the case on an error.
func view(t *testing.T, e engine.Engine, at uint64, fn func(context.Context, engine.Txn) error) {
	t.Helper()
	if err := e.Transact(bg, engine.TxnOptions{ReadOnly: true, At: at}, fn); err != nil {
		t.Fatalf("view at %d: %v", at, err)
	}
}

// cell names a cell of table t in a write.
type cell struct {
	row string
	col engine.Column
	// value is written; "" deletes the cell.
	value string
}

// write commits cells in one transaction of e.
func write(t *testing.T, e engine.Engine, cells ...cell) {
	t.Helper()
	update(t, e, func(_ context.Context, tx engine.Txn) error { return put(tx, cells...) })
}

// put buffers cells in tx.
func put(tx engine.Txn, cells ...cell) error {
	for _, c := range cells {
		var err error
		if c.value == "" {
			err = tx.Delete(table, []byte(c.row), c.col)
		} else {
			err = tx.Set(table, []byte(c.row), c.col, []byte(c.value))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// now returns a fresh timestamp of e's: the snapshot of a read-only
// transaction begun now, above every commit that completed before.
func now(t *testing.T, e engine.Engine) uint64 {
	t.Helper()
	var ts uint64
	view(t, e, 0, func(_ context.Context, tx engine.Txn) error { ts = tx.StartTs(); return nil })
	if ts == 0 {
		t.Fatal("a transaction began at timestamp 0")
	}
	return ts
}

// get reads (t, row, col) in tx: its value, or "-" if it is absent.
func get(ctx context.Context, tx engine.Txn, row string, col engine.Column) (string, error) {
	v, err := tx.Get(ctx, table, []byte(row), col)
	if errors.Is(err, engine.ErrNotFound) {
		return "-", nil
	}
	return string(v), err
}

// read reads (t, row, col) now in e: its value, or "-" if it is absent.
func read(t *testing.T, e engine.Engine, row string, col engine.Column) string {
	t.Helper()
	var v string
	view(t, e, 0, func(ctx context.Context, tx engine.Txn) error {
		var err error
		v, err = get(ctx, tx, row, col)
		return err
	})
	return v
}

// scan returns what a scan of tx yields, rendered by entries.
func scan(ctx context.Context, tx engine.Txn, o engine.ScanOptions) ([]string, error) {
	var out []engine.Entry
	for e, err := range tx.Scan(ctx, o) {
		if err != nil {
			return entries(out), err
		}
		out = append(out, e)
	}
	return entries(out), nil
}

// entries renders scanned cells as row/family:qualifier=value.
func entries(es []engine.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s/%s=%s", e.Row, e.Column, e.Value)
	}
	return out
}

// rowsOf renders what GetRows returned as row/family:qualifier=value, in
// row then column order.
func rowsOf(m map[string]map[engine.Column][]byte) []string {
	var out []string
	for row, cols := range m {
		for c, v := range cols {
			out = append(out, fmt.Sprintf("%s/%s=%s", row, c, v))
		}
	}
	slices.Sort(out)
	return out
}

// rows names rows of a GetRows.
func rows(names ...string) [][]byte {
	out := make([][]byte, len(names))
	for i, n := range names {
		out[i] = []byte(n)
	}
	return out
}

// wantList fails the case unless got is want.
func wantList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, show(got), show(want))
	}
}

func show(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	return "[" + strings.Join(l, " ") + "]"
}

// wantErr fails the case unless err matches each of targets.
func wantErr(t *testing.T, what string, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Errorf("%s: %v, want an error matching %v", what, err, target)
			return
		}
	}
}

// notifications returns what Find yields for table t in [start, end),
// rendered as row/family:qualifier.
func notifications(t *testing.T, e engine.Engine, start, end string) []string {
	t.Helper()
	var lo, hi []byte
	if start != "" {
		lo = []byte(start)
	}
	if end != "" {
		hi = []byte(end)
	}
	var out []string
	for n, err := range e.Find(bg, table, lo, hi) {
		if err != nil {
			t.Fatalf("Find: %v", err)
		}
		if n.Table != table {
			t.Errorf("Find of table %s yielded %s", table, n)
		}
		out = append(out, fmt.Sprintf("%s/%s", n.Row, n.Column))
	}
	return out
}

// pending reads what is pending for (t, row, col) in e.
func pending(t *testing.T, e engine.Engine, row string, col engine.Column) *engine.Pending {
	t.Helper()
	p, err := e.Pending(bg, engine.Notification{Table: table, Row: []byte(row), Column: col})
	if err != nil {
		t.Fatalf("Pending %s/%s: %v", row, col, err)
	}
	if p != nil && (p.Table != table || !bytes.Equal(p.Row, []byte(row)) || p.Column != col) {
		t.Fatalf("Pending %s/%s returned the notification %s", row, col, p.Notification)
	}
	return p
}

// versions is how many versions p holds (0 for nil).
func versions(p *engine.Pending) int {
	if p == nil {
		return 0
	}
	return len(p.Versions)
}
