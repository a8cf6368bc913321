package tikvengine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/store"
)

// TestClaimPrefetchesWhatRunsRead: once an observer's runs have shown
// which cells they read (columns of the notified row, and a fixed cell),
// Claim reads them in its batched request and the run's Gets send no
// request; the run still reads its own writes, and a cell no run read
// before is read from TiKV.
func TestClaimPrefetchesWhatRunsRead(t *testing.T) {
	db, c := open(t, nil)
	colC := store.Column{Family: "f", Qualifier: "c"}
	fixed := store.Column{Family: "g", Qualifier: "fixed"}
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		return tx.Set("u", []byte("config"), fixed, []byte("on"))
	})
	var gets int64
	run := func(i int, extra bool) {
		row := fmt.Sprintf("r%d", i)
		set(t, db, row, colA, "a")
		p := pending(t, db, row, weak)
		if p == nil {
			// a weak notification for the row
			update(t, db, func(ctx context.Context, tx engine.Txn) error { return tx.NotifyWeak("t", []byte(row), weak) })
			p = pending(t, db, row, weak)
		}
		update(t, db, func(ctx context.Context, tx engine.Txn) error {
			if _, err := db.Claim(ctx, tx, "obs", engine.Weak, p); err != nil {
				return err
			}
			before := c.RPCsByType()["Get"]
			if err := tx.Set("t", []byte(row), colB, []byte("mine")); err != nil {
				return err
			}
			for _, r := range []struct {
				table, row string
				col        store.Column
				want       string
			}{{"t", row, colA, "a"}, {"t", row, colB, "mine"}, {"u", "config", fixed, "on"}} {
				v, err := tx.Get(ctx, r.table, []byte(r.row), r.col)
				if err != nil || string(v) != r.want {
					t.Errorf("run %d: Get %s/%s/%s = %q, %v; want %q", i, r.table, r.row, r.col, v, err, r.want)
				}
			}
			gets = c.RPCsByType()["Get"] - before
			if extra {
				if _, err := tx.Get(ctx, "t", []byte(row), colC); err == nil {
					t.Errorf("run %d: a cell never written was found", i)
				}
			}
			return nil
		})
	}
	for i := range 4 {
		run(i, false)
		if gets == 0 {
			t.Fatalf("run %d, before the observer's reads were learned, sent no Get", i)
		}
	}
	run(4, true)
	if gets != 0 {
		t.Errorf("a run whose reads were learned sent %d Gets for them, want 0", gets)
	}
}
