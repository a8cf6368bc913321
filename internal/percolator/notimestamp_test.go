package percolator

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// Rule: a commit that failed for want of a commit timestamp did not
// commit, so Update runs the transaction again, as after a conflict: a
// brief outage of the oracle does not fail the update. After
// engine.TimestampRetries such failures it returns the error, having written
// nothing.
func TestUpdateRunsAgainAfterACommitWithoutATimestamp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails int64
		err   bool
	}{
		{"brief outage", engine.TimestampRetries, false},
		{"lasting outage", 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			st := &atomicCounter{DB: e.st.(*store.DB)}
			st.noTimestamp.Store(tc.fails)
			db := e.dbWith(t, st, &Options{WorkerID: "w", Logger: quietLogger()})
			runs := 0
			err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
				runs++
				return tx.Set("t", []byte("a"), col("v"), []byte("1"))
			})
			if runs != engine.TimestampRetries+1 {
				t.Errorf("fn ran %d times, want %d", runs, engine.TimestampRetries+1)
			}
			if !tc.err {
				if err != nil {
					t.Fatal(err)
				}
				if v, err := viewGet(db, "a", col("v")); err != nil || v != "1" {
					t.Fatalf("a = %q, %v after the update", v, err)
				}
				return
			}
			if !errors.Is(err, store.ErrNoTimestamp) || errors.Is(err, ErrCommitUnknown) {
				t.Fatalf("update through a lasting outage: %v, want store.ErrNoTimestamp", err)
			}
			if kinds := rawKinds(t, e); len(kinds) != 0 {
				t.Fatalf("records written: %v", kinds)
			}
		})
	}
}

// Rule: the same holds in two phases, where the oracle itself fails to
// draw the commit timestamp after the prewrites: the transaction is
// rolled back and run again, and a reader finds the second run's value.
func TestUpdateRunsAgainAfterTwoPhasesWithoutACommitTimestamp(t *testing.T) {
	e := newEnv(t)
	// Draw 1 is the first run's start, draw 2 its commit timestamp.
	e.or = &countingOracle{Oracle: e.or, failOn: func(n int64) bool { return n == 2 }}
	st := &atomicCounter{DB: e.st.(*store.DB), cannot: true}
	db := e.dbWith(t, st, &Options{WorkerID: "w", Logger: quietLogger()})
	runs := 0
	err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
		runs++
		return tx.Set("t", []byte("a"), col("v"), []byte(fmt.Sprint(runs)))
	})
	if err != nil || runs != 2 {
		t.Fatalf("update = %v after %d runs, want success after 2", err, runs)
	}
	if v, err := viewGet(db, "a", col("v")); err != nil || v != "2" {
		t.Fatalf("a = %q, %v; want the second run's 2", v, err)
	}
	if kinds := rawKinds(t, e); kinds[protocol.KindLock] != 0 || kinds[protocol.KindRollback] != 1 {
		t.Fatalf("records by kind: %v, want the first run rolled back and no lock left", kinds)
	}
}

// Rule: an update whose context ends is not run again, whatever the
// commit's error says, and returns that error as it is: here that nothing
// was written, for want of a commit timestamp.
func TestUpdateWithItsContextCanceledIsNotRunAgain(t *testing.T) {
	e := newEnv(t)
	db := e.db(t, "w", nil)
	ctx, cancel := context.WithCancel(context.Background())
	runs := 0
	err := db.Update(ctx, func(ctx context.Context, tx *Txn) error {
		runs++
		cancel()
		return tx.Set("t", []byte("a"), col("v"), []byte("1"))
	})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, store.ErrNoTimestamp) || runs != 1 {
		t.Fatalf("update = %v after %d runs, want the commit's own error (context.Canceled, store.ErrNoTimestamp) after 1", err, runs)
	}
}
