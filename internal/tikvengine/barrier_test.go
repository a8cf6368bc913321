package tikvengine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/pd/client/constants"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvengine"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// process opens an engine of namespace ns on a client of its own, as
// another process would, holding a GC barrier of its own.
func process(t *testing.T, c *tikvtest.Cluster, ns string, hijack func(tikvclient.Client) tikvclient.Client, o *tikvengine.BarrierOptions) (*tikvengine.DB, *tikvengine.Barrier) {
	return processWith(t, c, ns, hijack, o, nil)
}

func processWith(t *testing.T, c *tikvtest.Cluster, ns string, hijack func(tikvclient.Client) tikvclient.Client, o *tikvengine.BarrierOptions, eo *tikvengine.Options) (*tikvengine.DB, *tikvengine.Barrier) {
	t.Helper()
	kv := c.Client(t, hijack)
	var bo tikvengine.BarrierOptions
	if o != nil {
		bo = *o
	}
	bo.Namespace = ns
	b, err := tikvengine.NewBarrier(bg, kv, &bo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var opts tikvengine.Options
	if eo != nil {
		opts = *eo
	}
	opts.Namespace, opts.Barrier = ns, b
	return openClient(t, c, kv, &opts), b
}

// TestACollectionOfAnotherDeploymentDoesNotPassOurTransactions: two
// deployments share a cluster. B's transaction reads x; another process
// of B deletes x; A collects up to now, which would drop the deletion;
// B's transaction then writes x. Its first attempt must conflict with the
// deletion, as without the collection: A's collection stops at B's
// barrier.
func TestACollectionOfAnotherDeploymentDoesNotPassOurTransactions(t *testing.T) {
	c := tikvtest.New(t, nil)
	b1, _ := process(t, c, "B", nil, nil)
	b2, _ := process(t, c, "B", nil, nil)
	a, _ := process(t, c, "A", nil, nil)
	update(t, b1, func(_ context.Context, tx engine.Txn) error { return tx.Set("t", []byte("x"), colA, []byte("v")) })

	read, resume := make(chan struct{}), make(chan struct{})
	var attempts atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- b1.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
			n := attempts.Add(1)
			v, err := tx.Get(ctx, "t", []byte("x"), colA)
			if errors.Is(err, engine.ErrNotFound) {
				v, err = nil, nil
			}
			if err != nil {
				return err
			}
			if n == 1 {
				close(read)
				<-resume
			}
			return tx.Set("t", []byte("x"), colA, append(v, '+'))
		})
	}()
	<-read
	update(t, b2, func(_ context.Context, tx engine.Txn) error { return tx.Delete("t", []byte("x"), colA) })
	st, err := a.GC(bg, 0)
	if err != nil {
		t.Fatal(err)
	}
	close(resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, b1, 0, "x", colA); v != "+" || attempts.Load() != 2 {
		t.Fatalf("x = %q after %d attempts (A collected to %d): B's write went over the deletion A's collection dropped, want \"+\" after 2", v, attempts.Load(), st.SafePoint)
	}
}

// TestABarrierFollowsTheOldestTransaction: a barrier is below the oldest
// running transaction, rises once it ends, goes from PD with Close, and
// a process paused past its TTL fails its transactions.
func TestABarrierFollowsTheOldestTransaction(t *testing.T) {
	c := tikvtest.New(t, nil)
	db, b := processWith(t, c, "B", nil, &tikvengine.BarrierOptions{TTL: time.Hour, Refresh: 15 * time.Minute}, &tikvengine.Options{MaxAttempts: 1})
	states := c.KV.GetPDClient().GetGCStatesClient(constants.NullKeyspaceID)
	barrierOf := func() uint64 {
		t.Helper()
		st, err := states.GetGCState(bg)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range st.GCBarriers {
			if g.BarrierID == b.ID() {
				return g.BarrierTS
			}
		}
		return 0
	}
	in, out, ended := make(chan uint64), make(chan struct{}), make(chan error)
	go func() {
		ended <- db.Transact(bg, engine.TxnOptions{ReadOnly: true}, func(_ context.Context, tx engine.Txn) error {
			in <- tx.StartTs()
			<-out
			return nil
		})
	}()
	start := <-in
	set(t, db, "r", colA, "v")
	if err := b.Refresh(bg); err != nil {
		t.Fatal(err)
	}
	if got := barrierOf(); got != start-1 {
		t.Fatalf("barrier at %d while a transaction runs at %d, want %d", got, start, start-1)
	}
	close(out)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	later := set(t, db, "r", colA, "w")
	if err := b.Refresh(bg); err != nil {
		t.Fatal(err)
	}
	if got := barrierOf(); got <= later {
		t.Fatalf("barrier at %d once the transaction at %d ended and another ran at %d, want above it", got, start, later)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := barrierOf(); got != 0 {
		t.Fatalf("barrier still at %d after Close", got)
	}
	err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		_, err := tx.Get(ctx, "t", []byte("r"), colA)
		return err
	})
	if !errors.Is(err, engine.ErrSnapshotTooOld) {
		t.Fatalf("a transaction after its barrier lapsed: %v, want ErrSnapshotTooOld", err)
	}
}

// TestATransactionBegunBeforeABarrierLapsedFails: once the barrier lapsed
// (the process was paused past its TTL), a transaction that began before
// fails even after the barrier is set again, since a collection may have
// passed it meanwhile; one begun after runs.
func TestATransactionBegunBeforeABarrierLapsedFails(t *testing.T) {
	c := tikvtest.New(t, nil)
	// A TTL of a second, refreshed by hand only.
	db, b := processWith(t, c, "B", nil, &tikvengine.BarrierOptions{TTL: time.Second, Refresh: 250 * time.Millisecond}, &tikvengine.Options{MaxAttempts: 1})
	set(t, db, "r", colA, "v")
	err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		tikvengine.LapseBarrier(b) // as if paused past the TTL
		if err := b.Refresh(ctx); err != nil {
			return err
		}
		_, err := tx.Get(ctx, "t", []byte("r"), colA)
		return err
	})
	if !errors.Is(err, engine.ErrSnapshotTooOld) {
		t.Fatalf("a transaction begun before its barrier lapsed, read after it was set again: %v, want ErrSnapshotTooOld", err)
	}
	if v, ok := get(t, db, 0, "r", colA); !ok || v != "v" {
		t.Fatalf("a transaction begun after the barrier was set again reads %q, %v", v, ok)
	}
}

// TestPDDropsABarrierItsTTLAfterItWasSet: a process that died holding a
// barrier holds collections back for the barrier's TTL only.
func TestPDDropsABarrierItsTTLAfterItWasSet(t *testing.T) {
	c := tikvtest.New(t, nil)
	_, dead := process(t, c, "B", nil, &tikvengine.BarrierOptions{TTL: time.Minute, Refresh: 15 * time.Second})
	a, _ := process(t, c, "A", nil, nil)
	st, err := a.GC(bg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.SafePoint > dead.At() {
		t.Fatalf("a collection went to %d, past a live barrier at %d", st.SafePoint, dead.At())
	}
	c.AdvanceClock(2 * time.Minute) // dead never refreshes: its TTL runs out
	st2, err := a.GC(bg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st2.SafePoint <= dead.At() {
		t.Fatalf("a collection after the barrier's TTL stopped at %d, at or below the expired barrier %d", st2.SafePoint, dead.At())
	}
}
