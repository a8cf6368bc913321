package combine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/combine"
	"github.com/trickle-dev/trickle/framework/frameworktest"
)

var total = framework.Column{Family: "sum", Qualifier: "v"}

// TestConcurrentAddsToAHotRowNeverConflict: many transactions queue
// updates to one row at once; none conflicts (each writes its own cell), and
// once the queue's observer has folded them the value is the exact sum.
func TestConcurrentAddsToAHotRowNeverConflict(t *testing.T) {
	q, err := combine.New(combine.Config{Name: "sum", Table: "t", Value: total, Combine: combine.SumInt})
	if err != nil {
		t.Fatal(err)
	}
	reg := framework.NewRegistry()
	if err := q.Register(reg); err != nil {
		t.Fatal(err)
	}
	env, err := frameworktest.Start(context.Background(), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	db := env.DB()

	var wg sync.WaitGroup
	want := 0
	for g := range 8 {
		want += 25 * (g + 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				err := db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
					return q.Add(tx, []byte("hot"), fmt.Sprintf("g%d-%d", g, i), []byte(fmt.Sprint(g+1)))
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if c := env.Stats().Conflicts; c != 0 {
		t.Errorf("%d conflicts among queue appends", c)
	}
	waitCtx, stopWaiting := context.WithTimeout(context.Background(), 20*time.Second)
	defer stopWaiting()
	if err := env.WaitForObservers(waitCtx); err != nil {
		t.Fatal(err)
	}
	var got []byte
	queued := 0
	err = db.View(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: "t", Families: []string{"sum.q"}}) {
			if err != nil {
				return err
			}
			_ = e
			queued++
		}
		got, err = tx.Get(ctx, "t", []byte("hot"), total)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != fmt.Sprint(want) || queued != 0 {
		t.Fatalf("sum %s with %d entries left, want %d and none", got, queued, want)
	}
}
