package percolator

import (
	"context"
	"errors"
	"testing"
)

// Rule (a transaction a collection passed never commits): a worker whose
// reports stopped reaching the collector (its process paused longer than
// its liveness TTL, say) still runs its transaction when it resumes, on
// the safe point it knew. The collection removed the record of a
// concurrent delete of a cell the transaction read; its commit would find
// no conflict and bring the deleted value back — a lost update. The
// store refuses its prewrite, its one-phase commit, and its commit point
// when the collection came between prewrite and commit point, because its
// start is below the persisted safe point.
func TestACollectionThatPassedATransactionRefusesItsCommit(t *testing.T) {
	testPassedTransactionRefused(t, newEnv)
}

// The same on TiKV, where the store reads the safe point in the
// snapshot of each row transaction.
func TestACollectionThatPassedATransactionRefusesItsCommitOnTiKV(t *testing.T) {
	testPassedTransactionRefused(t, tikvEnv(nil))
}

func testPassedTransactionRefused(t *testing.T, newEnv func(testing.TB) *env) {
	for _, tc := range []struct {
		name      string
		twoPhases bool
		// collectAt, if set, is the commit step at which the collection
		// persists its safe point; else it runs before the commit.
		collectAt CommitStep
	}{
		{name: "one phase"},
		{name: "two phases", twoPhases: true},
		{name: "commit point", twoPhases: true, collectAt: StepPrewritten},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			x := []byte("x")
			writer := e.db(t, "writer", nil)
			if err := writer.Update(ctx, func(ctx context.Context, tx *Txn) error {
				return tx.Set("t", x, colA, []byte("v0"))
			}); err != nil {
				t.Fatal(err)
			}
			collector := e.db(t, "collector", nil)
			collect := func() {
				if _, err := collector.GC(ctx, 0); err != nil {
					t.Fatal(err)
				}
			}
			paused := e.db(t, "paused", func(o *Options) {
				o.DisableOnePhase = tc.twoPhases
				o.MaxAttempts = 1
				if tc.collectAt != 0 {
					o.Faults = func(step CommitStep, _ uint64) error {
						if step == tc.collectAt {
							// Only the safe point: the collection has
							// not reached the transaction's locks yet.
							e.clock.Advance(1)
							now, err := e.or.Timestamp(ctx)
							if err != nil {
								return err
							}
							_, err = saveSafePoint(ctx, e.st, now)
							return err
						}
						return nil
					}
				}
			})

			tx, err := paused.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if v, err := tx.Get(ctx, "t", x, colA); err != nil || string(v) != "v0" {
				t.Fatalf("read %q %v", v, err)
			}
			want := "v0" // what x reads in the end
			if tc.collectAt == 0 {
				// Meanwhile another worker deletes x, and a collection
				// whose listing no longer showed the paused worker
				// passes it.
				if err := writer.Update(ctx, func(ctx context.Context, tx *Txn) error {
					return tx.Delete("t", x, colA)
				}); err != nil {
					t.Fatal(err)
				}
				want = ""
				e.clock.Advance(1)
				collect()
			}
			if err := tx.Set("t", x, colA, []byte("v1")); err != nil {
				t.Fatal(err)
			}
			err = tx.Commit(ctx)
			if !errors.Is(err, ErrSnapshotTooOld) {
				t.Fatalf("the passed transaction's commit: %v, want ErrSnapshotTooOld", err)
			}
			collect() // whatever it left, as the next collection would
			if err := writer.View(ctx, func(ctx context.Context, tx *Txn) error {
				v, err := tx.Get(ctx, "t", x, colA)
				if errors.Is(err, ErrNotFound) {
					err = nil
				}
				if string(v) != want || err != nil {
					t.Errorf("x reads %q %v, want %q: the refused transaction's write took effect", v, err, want)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
