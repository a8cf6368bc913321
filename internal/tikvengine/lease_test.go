package tikvengine_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/enginetest"
	"github.com/trickle-dev/trickle/internal/tikvengine"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// A transaction begins only while the process's lease holds; one whose
// lease lapsed after it read (the process paused past it, and a
// collection may have passed the transaction) fails at its next read and
// at its commit, writing nothing, with ErrLeaseLost.
func TestTheLeaseGuardsReadsAndCommits(t *testing.T) {
	l := enginetest.NewLease()
	db, _ := open(t, &tikvengine.Options{Lease: l, MaxAttempts: 1})
	set(t, db, "r", colA, "1")

	err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		if _, err := tx.Get(ctx, "t", []byte("r"), colA); err != nil {
			return err
		}
		l.Set(2, true) // lapsed and taken again: a new term
		return tx.Set("t", []byte("r"), colA, []byte("2"))
	})
	if !errors.Is(err, engine.ErrLeaseLost) || !errors.Is(err, engine.ErrSnapshotTooOld) {
		t.Fatalf("commit after the lease lapsed: %v, want ErrLeaseLost and ErrSnapshotTooOld", err)
	}
	if v, _ := get(t, db, 0, "r", colA); v != "1" {
		t.Fatalf("after the refused commit the cell holds %q, want 1", v)
	}

	err = db.Transact(bg, engine.TxnOptions{ReadOnly: true}, func(ctx context.Context, tx engine.Txn) error {
		l.Set(2, false)
		_, err := tx.Get(ctx, "t", []byte("r"), colA)
		return err
	})
	if !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("a read after the lease lapsed: %v, want ErrLeaseLost", err)
	}
	if err := db.Transact(bg, engine.TxnOptions{}, func(context.Context, engine.Txn) error { return nil }); !errors.Is(err, engine.ErrLeaseLost) {
		t.Fatalf("a transaction begun without the lease: %v, want ErrLeaseLost", err)
	}
}

// A process paused after its transaction's last check and before its
// prewrites left, past its lease, while a collection passed the
// transaction: TiKV does not compare a prewrite with the safe point, so
// the engine checks the lease again once every prewrite succeeded and
// before the commit point. The transaction fails with ErrLeaseLost, its
// prewrites rolled back (another transaction writes the cell at once),
// and the cell keeps its value.
func TestALeaseLostBeforeThePrewritesLeftFailsTheCommit(t *testing.T) {
	c := tikvtest.New(t, nil)
	l := enginetest.NewLease()
	var pauses atomic.Int32
	kv := c.Client(t, func(inner tikvclient.Client) tikvclient.Client {
		return &onPrewrite{Client: inner, fn: func() {
			if pauses.Add(-1) >= 0 {
				l.Set(2, true) // paused past the lease, then registered again
			}
		}}
	})
	db := openClient(t, c, kv, &tikvengine.Options{Lease: l, MaxAttempts: 1})
	set(t, db, "r", colA, "1")

	pauses.Store(1)
	err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		if _, err := tx.Get(ctx, "t", []byte("r"), colA); err != nil {
			return err
		}
		return tx.Set("t", []byte("r"), colA, []byte("2"))
	})
	if !errors.Is(err, engine.ErrLeaseLost) || !errors.Is(err, engine.ErrSnapshotTooOld) {
		t.Fatalf("commit whose prewrites left after the lease lapsed: %v, want ErrLeaseLost and ErrSnapshotTooOld", err)
	}
	if pauses.Load() > 0 {
		t.Fatal("the transaction sent no prewrite: the test did not pause where it means to")
	}
	other := openOn(t, c, &tikvengine.Options{MaxAttempts: 1})
	if v, _ := get(t, other, 0, "r", colA); v != "1" {
		t.Fatalf("after the refused commit the cell holds %q, want 1", v)
	}
	ctx, cancel := context.WithTimeout(bg, 2*time.Second) // under the locks' TTL: no lock left behind
	defer cancel()
	if err := other.Transact(ctx, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		return tx.Set("t", []byte("r"), colA, []byte("3"))
	}); err != nil {
		t.Fatalf("writing the cell after the refused commit: %v (its prewrite left a lock?)", err)
	}
	// In the new term, the same process commits.
	set(t, db, "r", colA, "4")
}

// onPrewrite calls fn before each prewrite request leaves.
type onPrewrite struct {
	tikvclient.Client
	fn func()
}

func (c *onPrewrite) SendRequest(ctx context.Context, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	if req.Type == tikvrpc.CmdPrewrite {
		c.fn()
	}
	return c.Client.SendRequest(ctx, addr, req, timeout)
}
