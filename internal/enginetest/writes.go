package enginetest

import (
	"context"
	"errors"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
)

// The rules of what a transaction writes, and when it commits.
var writeRules = []rule{
	{"a read-only transaction refuses writes with ErrReadOnly", testReadOnlyRefusesWrites},
	{"of two writers of a cell the first to commit wins and the other runs again, reading its write", testFirstCommitterWins},
	{"a conflicted transaction fails with ErrConflict once MaxAttempts are spent", testMaxAttempts},
	{"an error from the function rolls the transaction back and is returned as is", testErrorRollsBack},
	{"a cell over the engine's limit fails with ErrTooLarge, having written nothing", testTooLarge},
}

func testReadOnlyRefusesWrites(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r", colA, "v"})
	at := now(t, d.e)
	for name, o := range map[string]engine.TxnOptions{"a view": {ReadOnly: true}, "a view as of a past timestamp": {ReadOnly: true, At: at}} {
		view(t, d.e, o.At, func(ctx context.Context, tx engine.Txn) error {
			wantErr(t, name+": Set", tx.Set(table, []byte("w"), colA, []byte("x")), engine.ErrReadOnly)
			wantErr(t, name+": Set of an observed column", tx.Set(table, []byte("w"), strongCol, []byte("x")), engine.ErrReadOnly)
			wantErr(t, name+": Delete", tx.Delete(table, []byte("r"), colA), engine.ErrReadOnly)
			wantErr(t, name+": NotifyWeak", tx.NotifyWeak(table, []byte("w"), weakCol), engine.ErrReadOnly)
			// The transaction still reads.
			if v, err := get(ctx, tx, "r", colA); err != nil || v != "v" {
				t.Errorf("%s: r = %q, %v after the refused writes; want v", name, v, err)
			}
			return nil
		})
	}
	for _, c := range []cell{{"r", colA, "v"}, {"w", colA, "-"}, {"w", strongCol, "-"}} {
		if v := read(t, d.e, c.row, c.col); v != c.value {
			t.Errorf("%s/%s = %q after the refused writes, want %q", c.row, c.col, v, c.value)
		}
	}
	wantList(t, "notifications after the refused writes", notifications(t, d.e, "", ""), nil)
}

// conflicted runs in e a transaction that appends "a" to r, during whose
// first attempt another process's transaction appends "b" and commits
// first. It returns the number of attempts and the error.
func conflicted(t *testing.T, e, other engine.Engine) (int, error) {
	t.Helper()
	attempts := 0
	err := e.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		attempts++
		v, err := get(ctx, tx, "r", colA)
		if err != nil {
			return err
		}
		if attempts == 1 {
			update(t, other, func(ctx context.Context, tx engine.Txn) error {
				w, err := get(ctx, tx, "r", colA)
				if err != nil {
					return err
				}
				return tx.Set(table, []byte("r"), colA, []byte(w+"b"))
			})
		}
		return tx.Set(table, []byte("r"), colA, []byte(v+"a"))
	})
	return attempts, err
}

func testFirstCommitterWins(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r", colA, "0"})
	before := d.e.Counts()
	attempts, err := conflicted(t, d.e, d.process())
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 2 {
		t.Errorf("the loser ran %d times, want 2 (once conflicted, once again)", attempts)
	}
	if v := read(t, d.e, "r", colA); v != "0ba" {
		t.Errorf("r = %q, want %q: the winner's write, then the loser's over it", v, "0ba")
	}
	after := d.e.Counts()
	if c := after.Conflicts - before.Conflicts; c != 1 {
		t.Errorf("Counts().Conflicts rose by %d, want 1", c)
	}
	if c := after.Committed - before.Committed; c != 1 {
		t.Errorf("Counts().Committed rose by %d, want 1", c)
	}
}

func testMaxAttempts(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{MaxAttempts: 1})
	write(t, d.e, cell{"r", colA, "0"})
	attempts, err := conflicted(t, d.e, d.process())
	wantErr(t, "the loser", err, engine.ErrConflict)
	if attempts != 1 {
		t.Errorf("the loser ran %d times with MaxAttempts 1", attempts)
	}
	if v := read(t, d.e, "r", colA); v != "0b" {
		t.Errorf("r = %q, want the winner's %q alone", v, "0b")
	}
}

func testErrorRollsBack(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r", colA, "v"})
	errOwn := errors.New("the function's own error")
	attempts := 0
	err := d.e.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		attempts++
		if err := put(tx, cell{"r", colA, ""}, cell{"w", colA, "x"}, cell{"w", strongCol, "x"}); err != nil {
			return err
		}
		if err := tx.NotifyWeak(table, []byte("w"), weakCol); err != nil {
			return err
		}
		return errOwn
	})
	if !errors.Is(err, errOwn) {
		t.Errorf("Transact = %v, want the function's error", err)
	}
	if attempts != 1 {
		t.Errorf("a failing function ran %d times, want once", attempts)
	}
	for _, c := range []cell{{"r", colA, "v"}, {"w", colA, "-"}, {"w", strongCol, "-"}} {
		if v := read(t, d.e, c.row, c.col); v != c.value {
			t.Errorf("%s/%s = %q after the rollback, want %q", c.row, c.col, v, c.value)
		}
	}
	wantList(t, "notifications after the rollback", notifications(t, d.e, "", ""), nil)
}

func testTooLarge(t *testing.T, h Harness) {
	if h.CellLimit == 0 {
		t.Skip("the engine sets no limit on a cell's size")
	}
	d := deploy(t, h, engine.Config{})
	big := make([]byte, h.CellLimit) // with its key, over the limit
	attempts := 0
	var setErr error
	err := d.e.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		attempts++
		if err := tx.Set(table, []byte("small"), colA, []byte("v")); err != nil {
			return err
		}
		setErr = tx.Set(table, []byte("big"), colA, big)
		return setErr
	})
	wantErr(t, "a transaction writing a cell over the limit", err, engine.ErrTooLarge)
	if setErr != nil && !errors.Is(setErr, engine.ErrTooLarge) {
		t.Errorf("Set of the cell: %v, want nil or ErrTooLarge", setErr)
	}
	if attempts != 1 {
		t.Errorf("the transaction ran %d times, want once", attempts)
	}
	for _, r := range []string{"small", "big"} {
		if v := read(t, d.e, r, colA); v != "-" {
			t.Errorf("%s holds %d bytes after the refusal", r, len(v))
		}
	}
}
