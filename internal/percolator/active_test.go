package percolator

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// The safe point never passes a running transaction, and no transaction
// starts below it, while transactions enter and leave concurrently with
// garbage collections raising it.
func TestSafePointNeverPassesARunningTransaction(t *testing.T) {
	var a activeSet
	var clock atomic.Uint64
	clock.Store(1)
	var wg sync.WaitGroup
	var violations, refused atomic.Int64
	stop := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ts := clock.Add(1)
				if _, ok := a.enter(ts); !ok {
					refused.Add(1)
					continue
				}
				for range 3 {
					if sp := a.safePoint.Load(); sp > ts {
						violations.Add(1)
					}
				}
				a.leave(ts)
			}
		})
	}
	for range 20000 {
		// Collect up to a timestamp ahead of every transaction started
		// so far: only the running ones may hold it back.
		sp := a.raise(clock.Load() + 100)
		if old := a.oldest(^uint64(0)); old != ^uint64(0) && old < sp {
			// A transaction that entered after raise returned with a
			// start below sp would be a violation; enter refuses those.
			if _, ok := a.enter(old); ok {
				a.leave(old)
				violations.Add(1)
			}
		}
	}
	close(stop)
	wg.Wait()
	if n := violations.Load(); n > 0 {
		t.Fatalf("%d times a running transaction was below the safe point", n)
	}
	if refused.Load() == 0 {
		t.Fatal("no transaction was ever refused: the safe point did not move ahead of new ones")
	}
	if got := a.oldest(^uint64(0)); got != ^uint64(0) {
		t.Fatalf("oldest after everyone left: %d", got)
	}
}

// The set counts transactions sharing a start timestamp, and the oldest is
// the smallest start still running.
func TestActiveSetCountsAndOldest(t *testing.T) {
	var a activeSet
	for _, ts := range []uint64{40, 17, 17, 33} {
		if _, ok := a.enter(ts); !ok {
			t.Fatalf("enter(%d) refused", ts)
		}
	}
	a.leave(17)
	if got := a.oldest(^uint64(0)); got != 17 {
		t.Fatalf("oldest %d, want 17 (one of two still running)", got)
	}
	a.leave(17)
	if got := a.oldest(^uint64(0)); got != 33 {
		t.Fatalf("oldest %d, want 33", got)
	}
	if sp := a.raise(100); sp != 33 {
		t.Fatalf("raise(100) = %d, want 33 (held back by the oldest)", sp)
	}
	if sp, ok := a.enter(20); ok || sp != 33 {
		t.Fatalf("enter(20) below the safe point: %d, %v", sp, ok)
	}
	a.leave(33)
	a.leave(40)
	if sp := a.raise(30); sp != 33 {
		t.Fatalf("raise(30) moved the safe point back to %d", sp)
	}
}

// Rule: a collection never passes a running transaction. A transaction
// drawing its timestamp is covered by OldestActive from before the oracle
// gives it: a collector that drew a later timestamp and then read this
// process's report cannot pass the one the transaction is about to get.
// Once it has begun, the floor it waited at is gone.
func TestOldestActiveCoversATransactionDrawingItsTimestamp(t *testing.T) {
	e := newEnv(t)
	or := &hookedOracle{Oracle: e.or, n: 1}
	db, err := New(e.st, or, &Options{WorkerID: "w", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var during uint64
	or.during = func() { during = db.OldestActive() }
	tx, err := db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if during == 0 || during > tx.StartTs() {
		t.Fatalf("while the oracle gave %d, OldestActive was %d", tx.StartTs(), during)
	}
	if got := db.OldestActive(); got != tx.StartTs() {
		t.Fatalf("after Begin, OldestActive = %d, want the transaction's %d", got, tx.StartTs())
	}
	tx.Rollback()
	if got := db.OldestActive(); got != 0 {
		t.Fatalf("after Rollback, OldestActive = %d, want 0", got)
	}
}
