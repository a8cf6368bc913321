package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/percolator"
)

// A process that finds its liveness token lapsed (it was paused, or its
// refreshes failed, longer than the TTL: a collection may have passed its
// transactions) fails the transactions it had running and adopts the safe
// point the collections persisted before it registers again.
func TestALapsedProcessAdoptsTheSafePointBeforeRegisteringAgain(t *testing.T) {
	ctx := context.Background()
	n, err := Open(ctx, Deployment{DataDir: t.TempDir(), NATSPort: -1, LivenessTTL: 30 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	db, err := n.OpenDB(ctx, framework.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	engine, err := percolator.From(n.engines.snapshot()[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("t", []byte("r"), framework.Column{Family: "f", Qualifier: "q"}, []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	running, err := engine.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer running.Rollback()

	// A collection elsewhere, which no longer saw this process, passes it.
	collector, err := percolator.New(n.Store(), n.Oracle(), &percolator.Options{Logger: n.log})
	if err != nil {
		t.Fatal(err)
	}
	gc, err := collector.GC(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if engine.SafePoint() >= gc.SafePoint {
		t.Fatalf("the engine knew the safe point %d before it lapsed", engine.SafePoint())
	}
	kv, err := n.js.KeyValue(ctx, n.cfg.Namespace+"_workers")
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "id."+n.cfg.WorkerID); err != nil { // its token expired
		t.Fatal(err)
	}
	if err := n.live.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if got := engine.SafePoint(); got < gc.SafePoint {
		t.Fatalf("after the lapse the engine's safe point is %d, want the collection's %d", got, gc.SafePoint)
	}
	if _, err := running.Get(ctx, "t", []byte("r"), framework.Column{Family: "f", Qualifier: "q"}); !errors.Is(err, percolator.ErrSnapshotTooOld) {
		t.Fatalf("the transaction that ran through the lapse reads: %v, want ErrSnapshotTooOld", err)
	}
	if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		_, err := tx.Get(ctx, "t", []byte("r"), framework.Column{Family: "f", Qualifier: "q"})
		return err
	}); err != nil {
		t.Fatalf("a transaction after the lapse: %v", err)
	}
}
