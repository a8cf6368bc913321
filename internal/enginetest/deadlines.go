package enginetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/internal/engine"
)

// The rules of a caller's context: once it ended, what the engine does
// for the caller ends with the context's error, and commits nothing it
// does not report.
var deadlineRules = []rule{
	{"a transaction whose context ended fails with the context's error", testEndedContext},
	{"a context that ends while the function runs fails the commit", testContextEndsInFn},
	{"the notification calls of an ended context fail with its error", testEndedNotifications},
	{"a collection whose context ended fails with its error", testEndedCollection},
}

// ended returns a context that was canceled and one whose deadline
// passed, with the error each matches.
func ended() map[string]struct {
	ctx context.Context
	err error
} {
	canceled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel2 := context.WithDeadline(bg, time.Unix(0, 0))
	cancel2()
	return map[string]struct {
		ctx context.Context
		err error
	}{"canceled": {canceled, context.Canceled}, "past its deadline": {expired, context.DeadlineExceeded}}
}

func testEndedContext(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r", colA, "v"})
	at := now(t, d.e)
	for name, c := range ended() {
		for kind, o := range map[string]engine.TxnOptions{"read-write": {}, "read-only": {ReadOnly: true}, "as of": {ReadOnly: true, At: at}} {
			err := d.e.Transact(c.ctx, o, func(ctx context.Context, tx engine.Txn) error {
				// An engine may begin without a request (a snapshot its
				// first read chooses): then the reads fail.
				if _, err := tx.Get(ctx, table, []byte("r"), colA); err != nil {
					return err
				}
				if _, err := scan(ctx, tx, engine.ScanOptions{Table: table}); err != nil {
					return err
				}
				if o.ReadOnly {
					return nil
				}
				return tx.Set(table, []byte("w"), colA, []byte("x"))
			})
			wantErr(t, kind+" transaction with a context "+name, err, c.err)
		}
	}
	if v := read(t, d.e, "w", colA); v != "-" {
		t.Errorf("w = %q: a transaction whose context had ended committed", v)
	}
}

func testContextEndsInFn(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r", colA, "v"})
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	attempts := 0
	err := d.e.Transact(ctx, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		attempts++
		if _, err := get(ctx, tx, "r", colA); err != nil {
			return err
		}
		if err := tx.Set(table, []byte("w"), colA, []byte("x")); err != nil {
			return err
		}
		cancel()
		return nil
	})
	switch {
	case errors.Is(err, engine.ErrCommitUnknown):
		// The commit may have gone through; either outcome is allowed.
	case errors.Is(err, context.Canceled):
		if v := read(t, d.e, "w", colA); v != "-" {
			t.Errorf("w = %q: a commit that failed with the context's error committed", v)
		}
	default:
		t.Errorf("a transaction whose context ended in its function: %v, want the context's error (or ErrCommitUnknown)", err)
	}
	if attempts != 1 {
		t.Errorf("the function ran %d times, want once", attempts)
	}
}

func testEndedNotifications(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r", strongCol, "v"})
	p := pending(t, d.e, "r", strongCol)
	if p == nil {
		t.Fatal("nothing pending after a strongly observed write")
	}
	for name, c := range ended() {
		var err error
		for _, err = range d.e.Find(c.ctx, table, nil, nil) {
			if err != nil {
				break
			}
		}
		wantErr(t, "Find with a context "+name, err, c.err)
		_, err = d.e.Pending(c.ctx, p.Notification)
		wantErr(t, "Pending with a context "+name, err, c.err)
		// Settle and NotifyWeak write: they may also report that the
		// outcome of their write is unknown.
		_, err = d.e.Settle(c.ctx, p, now(t, d.e))
		wantWriteErr(t, "Settle with a context "+name, err, c.err)
		err = d.e.NotifyWeak(c.ctx, table, []byte("w"), weakCol)
		wantWriteErr(t, "NotifyWeak with a context "+name, err, c.err)
	}
	if p := pending(t, d.e, "r", strongCol); versions(p) != 1 {
		t.Errorf("Pending after the calls with ended contexts: %s, want r/s:x's version kept", showPending(p))
	}
}

func testEndedCollection(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r", colA, "v1"})
	write(t, d.e, cell{"r", colA, "v2"})
	for name, c := range ended() {
		for _, upTo := range []uint64{0, now(t, d.e)} {
			st, err := d.e.GC(c.ctx, upTo)
			wantErr(t, fmt.Sprintf("GC up to %d with a context %s (safe point %d)", upTo, name, st.SafePoint), err, c.err)
		}
	}
}

// wantWriteErr fails the case unless err matches target or
// engine.ErrCommitUnknown.
func wantWriteErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) && !errors.Is(err, engine.ErrCommitUnknown) {
		t.Errorf("%s: %v, want an error matching %v or %v", what, err, target, engine.ErrCommitUnknown)
	}
}
