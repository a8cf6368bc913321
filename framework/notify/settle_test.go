package notify

import (
	"context"
	"sync"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/percolator"
)

// Rule: a run settles a notification whose writer's primary says nothing
// of it only if the writer started below the safe point from before the
// run. Here the writer commits after the run's snapshot, a newer write
// covers its primary's commit record, and a collection removes it before
// the run settles, the processor's DB adopting the collection's safe
// point meanwhile: judged by that safe point, the notification of a write
// the run never saw would be dropped, and its observer never run for it.
func TestANotificationOfAWriteTheRunNeverSawIsKept(t *testing.T) {
	ctx := context.Background()
	var e *obsEnv
	var writer *percolator.DB
	release, prewritten := make(chan struct{}), make(chan struct{})
	committed := make(chan error, 1)
	inRun := func(ctx context.Context, tx *framework.Txn, row []byte, col Column) error {
		// The run's snapshot is taken; now the writer commits, its
		// primary is overwritten and collected, and this process adopts
		// the collection's safe point.
		close(release)
		if err := <-committed; err != nil {
			return err
		}
		e.set(t, writer, "p", colA, "newer")
		e.clock.Advance(1)
		if _, err := e.db(t, "collector", nil).GC(ctx, 0); err != nil {
			return err
		}
		_, err := e.main.AdoptSafePoint(ctx)
		return err
	}
	e = newObsEnv(t, framework.Observer{Name: "weak", Table: "t", Columns: []Column{colW}, Kind: framework.Weak, Fn: inRun})
	writer = e.db(t, "writer", func(o *percolator.Options) {
		o.Observed = observedBy(e.reg)
		o.DisableOnePhase = true
		var once sync.Once
		o.Faults = func(step percolator.CommitStep, _ uint64) error {
			if step == percolator.StepPrewritten {
				once.Do(func() { close(prewritten); <-release })
			}
			return nil
		}
	})
	go func() {
		committed <- writer.Update(ctx, func(ctx context.Context, tx *percolator.Txn) error {
			if err := tx.Set("t", []byte("p"), colA, []byte("v")); err != nil {
				return err
			}
			return tx.NotifyWeak("t", []byte("r"), colW)
		})
	}()
	<-prewritten // its notification is written, its commit point not yet

	if _, err := e.w.Process(ctx, Notification{Table: "t", Row: []byte("r"), Column: colW}); err != nil {
		t.Fatal(err)
	}
	if got := e.pending(t); len(got) != 1 {
		t.Fatalf("pending after the run: %v; the notification of a write committed after the run's snapshot was settled", got)
	}
}
