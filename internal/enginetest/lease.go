package enginetest

import (
	"context"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
)

// The rules of a process's lease (engine.Lease): what a transaction reads
// counts only while the lease it began in holds.
var leaseRules = []rule{
	{"no transaction begins while the lease has lapsed: ErrLeaseLost", testNoBeginWithoutLease},
	{"a read after the lease lapsed fails with ErrSnapshotTooOld and ErrLeaseLost", testReadAfterLapse},
	{"a transaction whose lease was lost and taken again while it ran runs again in the new term", testNewTerm},
}

func testNoBeginWithoutLease(t *testing.T, h Harness) {
	lease := NewLease()
	d := deploy(t, h, engine.Config{Lease: lease})
	write(t, d.e, cell{"r", colA, "v"})
	at := now(t, d.e)
	lease.Set(1, false)
	for name, o := range map[string]engine.TxnOptions{"read-write": {}, "read-only": {ReadOnly: true}, "as of": {ReadOnly: true, At: at}} {
		ran := false
		err := d.e.Transact(bg, o, func(context.Context, engine.Txn) error { ran = true; return nil })
		wantErr(t, name+" without the lease", err, engine.ErrLeaseLost)
		if ran {
			t.Errorf("a %s transaction ran without the lease", name)
		}
	}
}

func testReadAfterLapse(t *testing.T, h Harness) {
	lease := NewLease()
	d := deploy(t, h, engine.Config{Lease: lease})
	write(t, d.e, cell{"r", colA, "v"}, cell{"s", colA, "w"})
	for name, o := range map[string]engine.TxnOptions{"read-write": {}, "read-only": {ReadOnly: true}} {
		lease.Set(1, true)
		reads := map[string]error{}
		err := d.e.Transact(bg, o, func(ctx context.Context, tx engine.Txn) error {
			if _, err := get(ctx, tx, "r", colA); err != nil {
				return err
			}
			lease.Set(1, false)
			_, reads["Get"] = tx.Get(ctx, table, []byte("s"), colA)
			_, reads["GetRows"] = tx.GetRows(ctx, table, rows("s"), []engine.Column{colA})
			_, reads["Scan"] = scan(ctx, tx, engine.ScanOptions{Table: table})
			if !o.ReadOnly {
				if err := tx.Set(table, []byte("w"), colA, []byte("x")); err != nil {
					return err
				}
			}
			return reads["Get"]
		})
		for op, err := range reads {
			wantErr(t, name+": "+op+" after the lapse", err, engine.ErrSnapshotTooOld, engine.ErrLeaseLost)
		}
		// Run again (a read-write one), it cannot begin.
		wantErr(t, name+": the transaction", err, engine.ErrLeaseLost)
	}
	lease.Set(2, true)
	if v := read(t, d.e, "w", colA); v != "-" {
		t.Errorf("w = %q: a transaction whose reads failed committed", v)
	}
}

func testNewTerm(t *testing.T, h Harness) {
	lease := NewLease()
	d := deploy(t, h, engine.Config{Lease: lease})
	write(t, d.e, cell{"r", colA, "0"})
	attempts := 0
	err := d.e.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		attempts++
		if attempts == 1 {
			lease.Set(2, true) // lost and taken again before the read
		}
		v, err := get(ctx, tx, "r", colA)
		if err != nil {
			return err
		}
		return tx.Set(table, []byte("r"), colA, []byte(v+"+"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 2 {
		t.Errorf("the transaction ran %d times, want 2", attempts)
	}
	if v := read(t, d.e, "r", colA); v != "0+" {
		t.Errorf("r = %q, want %q", v, "0+")
	}
}
