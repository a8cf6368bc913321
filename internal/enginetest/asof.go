package enginetest

import (
	"context"
	"errors"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
)

// The rules of reads as of a past timestamp (TxnOptions.At): a view is
// registered, checked against the safe point, run, and checked again.
var asOfRules = []rule{
	{"a view as of a past timestamp reads the store as it was then", testAsOfReadsThePast},
	{"a view below the safe point fails with ErrSnapshotTooOld without running", testAsOfBelowSafePoint},
	{"a view that a collection passes while it runs fails with ErrSnapshotTooOld", testAsOfPassedWhileRunning},
	{"a view that a collection below it meets while it runs reads its snapshot", testAsOfNotPassed},
	{"a view of a timestamp not handed out yet fails with ErrFutureSnapshot", testAsOfFuture},
}

// past commits r=v1, draws a timestamp, then commits r=v2 and s: the
// timestamp sees r=v1 and no s.
func past(t *testing.T, e engine.Engine) uint64 {
	t.Helper()
	write(t, e, cell{"r", colA, "v1"})
	ts := now(t, e)
	write(t, e, cell{"r", colA, "v2"}, cell{"s", colA, "new"})
	return ts
}

// readPast checks that tx reads what past left at its timestamp.
func readPast(ctx context.Context, t *testing.T, tx engine.Txn) error {
	t.Helper()
	for _, c := range []cell{{"r", colA, "v1"}, {"s", colA, "-"}} {
		v, err := get(ctx, tx, c.row, c.col)
		if err != nil {
			return err
		}
		if v != c.value {
			t.Errorf("as of %d: %s = %q, want %q", tx.StartTs(), c.row, v, c.value)
		}
	}
	got, err := tx.GetRows(ctx, table, rows("r", "s"), []engine.Column{colA})
	if err != nil {
		return err
	}
	wantList(t, "GetRows as of the past", rowsOf(got), []string{"r/f:a=v1"})
	scanned, err := scan(ctx, tx, engine.ScanOptions{Table: table})
	wantList(t, "a scan as of the past", scanned, []string{"r/f:a=v1"})
	return err
}

func testAsOfReadsThePast(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	ts := past(t, d.e)
	view(t, d.e, ts, func(ctx context.Context, tx engine.Txn) error {
		if got := tx.StartTs(); got != ts {
			t.Errorf("a view as of %d has the snapshot %d", ts, got)
		}
		return readPast(ctx, t, tx)
	})
	// Another process reads the same past.
	view(t, d.process(), ts, func(ctx context.Context, tx engine.Txn) error { return readPast(ctx, t, tx) })
	if v := read(t, d.e, "r", colA); v != "v2" {
		t.Errorf("r now = %q, want v2", v)
	}
}

func testAsOfBelowSafePoint(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	other := d.process() // opened before the collection: it learns the safe point from the store
	ts := past(t, d.e)
	st, err := d.e.GC(bg, now(t, d.e))
	if err != nil {
		t.Fatal(err)
	}
	if st.SafePoint <= ts {
		t.Fatalf("a collection up to now made the safe point %d, not above %d", st.SafePoint, ts)
	}
	for name, e := range map[string]engine.Engine{"the collecting process": d.e, "another process": other} {
		ran := false
		err := e.Transact(bg, engine.TxnOptions{ReadOnly: true, At: ts}, func(context.Context, engine.Txn) error {
			ran = true
			return nil
		})
		wantErr(t, name+": a view below the safe point", err, engine.ErrSnapshotTooOld)
		if ran {
			t.Errorf("%s: a view below the safe point ran its function", name)
		}
		// The safe point is inclusive: a view there is whole.
		view(t, e, st.SafePoint, func(ctx context.Context, tx engine.Txn) error {
			if v, err := get(ctx, tx, "r", colA); err != nil || v != "v2" {
				t.Errorf("%s: r at the safe point = %q, %v; want v2", name, v, err)
			}
			return nil
		})
	}
}

// testAsOfPassedWhileRunning: another process's collection, which does
// not know of the view, passes it while its function runs. The view
// fails with ErrSnapshotTooOld once the function returns, whether the
// function saw an error or not, and whatever it returned.
func testAsOfPassedWhileRunning(t *testing.T, h Harness) {
	errOwn := errors.New("the view's own error")
	for _, c := range []struct {
		name string
		ret  error
	}{{"the function returns nil", nil}, {"the function fails", errOwn}} {
		t.Run(c.name, func(t *testing.T) {
			d := deploy(t, h, engine.Config{})
			collector := d.process()
			ts := past(t, d.e)
			upTo := now(t, d.e)
			var read string
			var readErr error
			err := d.e.Transact(bg, engine.TxnOptions{ReadOnly: true, At: ts}, func(ctx context.Context, tx engine.Txn) error {
				if _, err := collector.GC(ctx, upTo); err != nil {
					t.Errorf("the collection: %v", err)
				}
				read, readErr = get(ctx, tx, "r", colA)
				return c.ret
			})
			if !errors.Is(err, engine.ErrSnapshotTooOld) {
				t.Errorf("a view passed by a collection while it ran: %v (it read r = %q, %v), want ErrSnapshotTooOld", err, read, readErr)
			}
		})
	}
}

func testAsOfNotPassed(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	collector := d.process()
	ts := past(t, d.e)
	view(t, d.e, ts, func(ctx context.Context, tx engine.Txn) error {
		if _, err := collector.GC(ctx, ts); err != nil {
			return err
		}
		return readPast(ctx, t, tx)
	})
}

func testAsOfFuture(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r", colA, "v"})
	// Far past anything handed out, whatever a timestamp's layout (a
	// hybrid one's physical part moves 2^40 logical ticks in about an
	// hour).
	future := now(t, d.e) + 1<<40
	ran := false
	err := d.e.Transact(bg, engine.TxnOptions{ReadOnly: true, At: future}, func(context.Context, engine.Txn) error {
		ran = true
		return nil
	})
	wantErr(t, "a view of the future", err, engine.ErrFutureSnapshot)
	if ran {
		t.Error("a view of the future ran its function")
	}
}
