package enginetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
)

// The rules of notifications (engine.Notifications), as the observer
// runtime works through them: find, read what is pending, claim in the
// run's transaction, settle what the run dealt with.
var notificationRules = []rule{
	{"a strongly observed write leaves a notification that Find and Pending find", testStrongWriteNotifies},
	{"every notification a commit left is found once it returned", testFindAfterCommit},
	{"Find yields the notifications of its rows in row order", testFindBounds},
	{"Find of a reserved table is refused with ErrInvalidKey", testFindReserved},
	{"a run claims a change and Settle removes what it dealt with; a write made while it ran leaves a fresh notification", testClaimSettle},
	{"a change already claimed is not claimed again", testClaimOnce},
	{"of two runs claiming one change one commits; the other, run again, finds it claimed", testConcurrentClaims},
	{"NotifyWeak is refused with ErrNotWeak for a column no weak observer observes", testNotWeak},
	{"a weak notification is found, its run goes ahead, and Settle removes it", testWeakNotification},
	{"Discard removes every pending version", testDiscard},
	{"Backlog yields each pending notification with its versions, newest first", testBacklog},
	{"Renotify notifies each cell it is given, whatever its observer's kind", testRenotify},
	{"the Notified hook is given the rows each commit notified, with their columns", testNotifiedHook},
}

func testStrongWriteNotifies(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	update(t, d.e, func(_ context.Context, tx engine.Txn) error {
		// Twice in one transaction: one version.
		return put(tx, cell{"r1", strongCol, "1"}, cell{"r1", strongCol, "2"}, cell{"r2", colA, "unobserved"}, cell{"r3", weakCol, "weak"})
	})
	write(t, d.e, cell{"r4", strongCol, ""}) // a deletion notifies too
	// A strongly observed column of another table is not observed there.
	update(t, d.e, func(_ context.Context, tx engine.Txn) error {
		return tx.Set(otherTable, []byte("r1"), strongCol, []byte("v"))
	})
	wantList(t, "Find", notifications(t, d.e, "", ""), []string{"r1/s:x", "r4/s:x"})
	for _, c := range []struct {
		row      string
		col      engine.Column
		versions int
	}{{"r1", strongCol, 1}, {"r4", strongCol, 1}, {"r2", colA, 0}, {"r3", weakCol, 0}, {"r2", strongCol, 0}} {
		if n := versions(pending(t, d.e, c.row, c.col)); n != c.versions {
			t.Errorf("Pending %s/%s holds %d versions, want %d", c.row, c.col, n, c.versions)
		}
	}
	for n, err := range d.e.Find(bg, otherTable, nil, nil) {
		t.Errorf("Find in the unobserved table %s yielded %s, %v", otherTable, n, err)
	}
	// A second writer: a second version, newer first; the cell is still
	// found once.
	write(t, d.e, cell{"r1", strongCol, "3"})
	wantList(t, "Find after a second writer", notifications(t, d.e, "", ""), []string{"r1/s:x", "r4/s:x"})
	// Another process reads both, newest first. The writers' own may
	// answer from what it knows of its own commits: the newest version at
	// least (an older one it handed out before stays for a later run).
	p := pending(t, d.process(), "r1", strongCol)
	if versions(p) != 2 || p.Versions[0] <= p.Versions[1] {
		t.Errorf("another process: Pending after a second writer = %s, want two versions, newest first", showPending(p))
	}
	if own := pending(t, d.e, "r1", strongCol); versions(own) == 0 || versions(p) == 0 || own.Versions[0] != p.Versions[0] {
		t.Errorf("the writers' process: Pending after a second writer = %s, want the newest version (%s) first", showPending(own), showPending(p))
	}
}

func testFindAfterCommit(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	other := d.process()
	// One transaction notifying several rows (a transaction's keys beyond
	// the first may be committed after the commit returned, on an engine
	// that commits them asynchronously).
	write(t, d.e, cell{"c4", strongCol, "v"}, cell{"a1", strongCol, "v"}, cell{"r2", strongCol, "v"}, cell{"b2", strongCol, "v"})
	want := []string{"a1/s:x", "b2/s:x", "c4/s:x", "r2/s:x"}
	wantList(t, "Find in the writer's process", notifications(t, d.e, "", ""), want)
	wantList(t, "Find in another process", notifications(t, other, "", ""), want)
}

func testFindBounds(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	for _, r := range []string{"c4", "a1", "r2", "b2"} {
		write(t, d.e, cell{r, strongCol, "v"})
	}
	for _, c := range []struct {
		start, end string
		want       []string
	}{
		{"", "", []string{"a1/s:x", "b2/s:x", "c4/s:x", "r2/s:x"}},
		{"b2", "", []string{"b2/s:x", "c4/s:x", "r2/s:x"}},
		{"", "c4", []string{"a1/s:x", "b2/s:x"}},
		{"b", "r", []string{"b2/s:x", "c4/s:x"}},
		{"c5", "r1", nil},
	} {
		wantList(t, fmt.Sprintf("Find in [%q, %q)", c.start, c.end), notifications(t, d.e, c.start, c.end), c.want)
	}
}

func testFindReserved(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	var found []string
	var err error
	for n, ferr := range d.e.Find(bg, protocol.ReservedPrefix+"x", nil, nil) {
		if ferr != nil {
			err = ferr
			break
		}
		found = append(found, n.String())
	}
	wantErr(t, "Find in a reserved table (yielding "+show(found)+")", err, engine.ErrInvalidKey)
}

// runObserver is an observer's run for p as the runtime makes it: a
// transaction of e that claims p for observer obs and, if it changed,
// calls during and writes the observer's output. It returns whether the
// run claimed a change, and its snapshot.
func runObserver(t *testing.T, e engine.Engine, obs string, kind engine.Kind, p *engine.Pending, during func()) (changed bool, runTs uint64) {
	t.Helper()
	update(t, e, func(ctx context.Context, tx engine.Txn) error {
		runTs = tx.StartTs()
		var err error
		if changed, err = e.Claim(ctx, tx, obs, kind, p); err != nil || !changed {
			return err
		}
		if during != nil {
			during()
		}
		return tx.Set(table, p.Row, colB, []byte("observed by "+obs))
	})
	return changed, runTs
}

func testClaimSettle(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	writer := d.process()
	write(t, d.e, cell{"r", strongCol, "1"})
	p := pending(t, d.e, "r", strongCol)
	if versions(p) != 1 {
		t.Fatalf("Pending = %s, want one version", showPending(p))
	}
	changed, runTs := runObserver(t, d.e, "obs", engine.Strong, p, func() { write(t, writer, cell{"r", strongCol, "2"}) })
	if !changed {
		t.Fatal("the first run claimed no change")
	}
	s, err := d.e.Settle(bg, p, runTs)
	if err != nil {
		t.Fatal(err)
	}
	if s.Removed != 1 || s.Kept != 0 {
		t.Errorf("Settle = %+v, want the run's one version removed and none kept", s)
	}
	fresh := pending(t, d.e, "r", strongCol)
	if versions(fresh) != 1 || slices.Contains(p.Versions, fresh.Versions[0]) {
		t.Fatalf("after Settle Pending = %s, want only the version of the write made during the run (the run's: %v)", showPending(fresh), p.Versions)
	}
	wantList(t, "Find after the first run", notifications(t, d.e, "", ""), []string{"r/s:x"})
	// The next run claims the write made during the first.
	changed, runTs = runObserver(t, d.e, "obs", engine.Strong, fresh, nil)
	if !changed {
		t.Fatal("the write made during the first run was not claimed")
	}
	if s, err := d.e.Settle(bg, fresh, runTs); err != nil || s.Removed != 1 || s.Kept != 0 {
		t.Errorf("Settle = %+v, %v; want one version removed", s, err)
	}
	wantNothingPending(t, d.e, "once every write was settled")
	if v := read(t, d.e, "r", colB); v != "observed by obs" {
		t.Errorf("the observer's output = %q", v)
	}
}

func testClaimOnce(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r", strongCol, "1"})
	p := pending(t, d.e, "r", strongCol)
	if changed, _ := runObserver(t, d.e, "obs", engine.Strong, p, nil); !changed {
		t.Fatal("the first run claimed no change")
	}
	// Run again before anything is settled: nothing new.
	if changed, _ := runObserver(t, d.e, "obs", engine.Strong, p, nil); changed {
		t.Error("a second run claimed the change the first claimed")
	}
	// Another observer of the column has not claimed it.
	if changed, _ := runObserver(t, d.e, "another", engine.Strong, p, nil); !changed {
		t.Error("another observer's run claimed nothing")
	}
}

func testConcurrentClaims(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	rival := d.process()
	write(t, d.e, cell{"r", strongCol, "1"})
	p := pending(t, d.e, "r", strongCol)
	var claims []bool
	var rivalChanged bool
	update(t, d.e, func(ctx context.Context, tx engine.Txn) error {
		changed, err := d.e.Claim(ctx, tx, "obs", engine.Strong, p)
		if err != nil {
			return err
		}
		claims = append(claims, changed)
		if !changed {
			return nil
		}
		if len(claims) == 1 {
			// The rival's run of the same change commits first.
			rivalChanged, _ = runObserver(t, rival, "obs", engine.Strong, pending(t, rival, "r", strongCol), nil)
		}
		return tx.Set(table, p.Row, colB, []byte("observed by the first run"))
	})
	if !rivalChanged {
		t.Error("the rival's run claimed nothing")
	}
	if !slices.Equal(claims, []bool{true, false}) {
		t.Errorf("the first run's claims = %v, want [true false]: it conflicts, and run again finds the change claimed", claims)
	}
	if v := read(t, d.e, "r", colB); v != "observed by obs" {
		t.Errorf("the observer's output = %q, want the rival's", v)
	}
}

func testNotWeak(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	for _, c := range []struct {
		name  string
		table string
		col   engine.Column
	}{
		{"a strongly observed column", table, strongCol},
		{"an unobserved column", table, colA},
		{"a weak column of a table where it is not observed", otherTable, weakCol},
	} {
		wantErr(t, "NotifyWeak of "+c.name, d.e.NotifyWeak(bg, c.table, []byte("r"), c.col), engine.ErrNotWeak)
		var inTxn error
		update(t, d.e, func(_ context.Context, tx engine.Txn) error {
			inTxn = tx.NotifyWeak(c.table, []byte("r"), c.col)
			return nil
		})
		wantErr(t, "Txn.NotifyWeak of "+c.name, inTxn, engine.ErrNotWeak)
	}
	// An engine that knows no observed column refuses every one.
	none := d.open(t, engine.Config{Observed: observedNone{}})
	wantErr(t, "NotifyWeak on an engine observing nothing", none.NotifyWeak(bg, table, []byte("r"), weakCol), engine.ErrNotWeak)
	wantList(t, "notifications after the refusals", notifications(t, d.e, "", ""), nil)
}

// observedNone observes nothing.
type observedNone struct{}

func (observedNone) ObservedKind(string, engine.Column) (engine.Kind, bool) { return 0, false }

func testWeakNotification(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	if err := d.e.NotifyWeak(bg, table, []byte("w1"), weakCol); err != nil {
		t.Fatal(err)
	}
	update(t, d.e, func(_ context.Context, tx engine.Txn) error {
		for range 2 { // twice in one transaction: one version
			if err := tx.NotifyWeak(table, []byte("w2"), weakCol); err != nil {
				return err
			}
		}
		return nil
	})
	// Asked in a transaction that fails: not asked.
	errOwn := errors.New("the function's own error")
	err := d.e.Transact(bg, engine.TxnOptions{}, func(_ context.Context, tx engine.Txn) error {
		if err := tx.NotifyWeak(table, []byte("w3"), weakCol); err != nil {
			return err
		}
		return errOwn
	})
	if !errors.Is(err, errOwn) {
		t.Fatalf("the failing transaction: %v", err)
	}
	wantList(t, "Find", notifications(t, d.e, "", ""), []string{"w1/w:x", "w2/w:x"})
	for _, row := range []string{"w1", "w2"} {
		p := pending(t, d.e, row, weakCol)
		if versions(p) != 1 {
			t.Fatalf("Pending %s = %s, want one version", row, showPending(p))
		}
		// A weak observer's run goes ahead: no claim stands in its way.
		// (A run with nothing left to see may be skipped: weak observers
		// run at least once per request, not exactly.)
		changed, runTs := runObserver(t, d.e, "weak", engine.Weak, p, nil)
		if !changed {
			t.Errorf("%s: the weak run did not go ahead", row)
		}
		if s, err := d.e.Settle(bg, p, runTs); err != nil || s.Removed != 1 {
			t.Errorf("%s: Settle = %+v, %v; want its version removed", row, s, err)
		}
		if p := pending(t, d.e, row, weakCol); p != nil {
			t.Errorf("Pending %s = %s after its run settled it", row, showPending(p))
		}
	}
	wantList(t, "Find after the runs", notifications(t, d.e, "", ""), nil)
}

func testDiscard(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r", strongCol, "1"})
	write(t, d.e, cell{"r", strongCol, "2"})
	p := pending(t, d.e, "r", strongCol)
	if versions(p) != 2 {
		t.Fatalf("Pending = %s, want two versions", showPending(p))
	}
	if err := d.e.Discard(bg, p); err != nil {
		t.Fatal(err)
	}
	wantNothingPending(t, d.e, "after Discard")
	if v := read(t, d.e, "r", strongCol); v != "2" {
		t.Errorf("the cell = %q after Discard, want its value kept", v)
	}
}

func testBacklog(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r1", strongCol, "1"})
	write(t, d.e, cell{"r1", strongCol, "2"}, cell{"r2", strongCol, "1"})
	if err := d.e.NotifyWeak(bg, table, []byte("r3"), weakCol); err != nil {
		t.Fatal(err)
	}
	var got []string
	for w, err := range d.e.Backlog(bg, table) {
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(w.Versions, func(a, b uint64) int { return int(int64(b - a)) }) {
			t.Errorf("Backlog %s: versions %v, want newest first", w.Notification, w.Versions)
		}
		got = append(got, fmt.Sprintf("%s/%s:%d", w.Row, w.Column, len(w.Versions)))
	}
	wantList(t, "Backlog", got, []string{"r1/s:x:2", "r2/s:x:1", "r3/w:x:1"})
}

func testRenotify(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r", strongCol, "v"}, cell{"r", weakCol, "w"})
	p := pending(t, d.e, "r", strongCol)
	if err := d.e.Discard(bg, p); err != nil {
		t.Fatal(err)
	}
	at := now(t, d.e)
	n, err := d.e.Renotify(bg, at, []engine.NotifiedRow{{Table: table, Row: []byte("r"), Columns: []engine.Column{strongCol, weakCol}}})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("Renotify notified %d cells, want 2", n)
	}
	// A run whose snapshot is at or after at sees the cells, and settles
	// them.
	for _, c := range []struct {
		col  engine.Column
		kind engine.Kind
	}{{strongCol, engine.Strong}, {weakCol, engine.Weak}} {
		p := pending(t, d.e, "r", c.col)
		if versions(p) != 1 {
			t.Fatalf("Pending %s = %s, want one version", c.col, showPending(p))
		}
		changed, runTs := runObserver(t, d.e, "new", c.kind, p, nil)
		if !changed {
			t.Errorf("a new observer's run of %s claimed nothing", c.col)
		}
		if s, err := d.e.Settle(bg, p, runTs); err != nil || s.Removed != 1 {
			t.Errorf("Settle %s = %+v, %v; want its version removed", c.col, s, err)
		}
	}
	for _, col := range []engine.Column{strongCol, weakCol} {
		if p := pending(t, d.e, "r", col); p != nil {
			t.Errorf("Pending %s = %s after its run settled it", col, showPending(p))
		}
	}
}

func testNotifiedHook(t *testing.T, h Harness) {
	var mu sync.Mutex
	var calls []string
	hook := func(rs []engine.NotifiedRow) {
		var call []string
		for _, r := range rs {
			cols := make([]string, len(r.Columns))
			for i, c := range r.Columns {
				cols[i] = c.String()
			}
			slices.Sort(cols)
			call = append(call, fmt.Sprintf("%s/%s%v", r.Table, r.Row, cols))
		}
		slices.Sort(call)
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, show(call))
	}
	took := func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := calls
		calls = nil
		return out
	}
	d := deploy(t, h, engine.Config{Notified: hook})
	write(t, d.e, cell{"r", strongCol, "v"}, cell{"r", colA, "a"}, cell{"s", strongCol, ""})
	wantList(t, "the hook after a commit that notified r and s", took(), []string{"[t/r[s:x] t/s[s:x]]"})
	write(t, d.e, cell{"r", colA, "unobserved"}, cell{"r", weakCol, "weak"})
	wantList(t, "the hook after a commit that notified nothing", took(), nil)
	if err := d.e.NotifyWeak(bg, table, []byte("w"), weakCol); err != nil {
		t.Fatal(err)
	}
	wantList(t, "the hook after NotifyWeak", took(), []string{"[t/w[w:x]]"})
	update(t, d.e, func(_ context.Context, tx engine.Txn) error {
		if err := tx.NotifyWeak(table, []byte("w"), weakCol); err != nil {
			return err
		}
		return tx.Set(table, []byte("w"), strongCol, []byte("v"))
	})
	wantList(t, "the hook after a commit that notified w weakly and strongly", took(), []string{"[t/w[s:x w:x]]"})
}

// showPending renders p with its versions.
func showPending(p *engine.Pending) string {
	if p == nil {
		return "nothing"
	}
	return fmt.Sprintf("%s versions %v", p.Notification, p.Versions)
}

// wantNothingPending checks that neither Pending of r's strong column nor
// Find sees anything pending, when says after what.
func wantNothingPending(t *testing.T, e engine.Engine, when string) {
	t.Helper()
	if p := pending(t, e, "r", strongCol); p != nil {
		t.Errorf("Pending = %s %s", showPending(p), when)
	}
	wantList(t, "Find "+when, notifications(t, e, "", ""), nil)
}
