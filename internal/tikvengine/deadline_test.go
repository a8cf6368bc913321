package tikvengine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// TestDeadline: on a cluster slower than the caller's deadline, reads,
// scans, Find and commits end with the deadline's error.
func TestDeadline(t *testing.T) {
	db, c := open(t, nil)
	set(t, db, "r", colA, "v")
	set(t, db, "r", strong, "v")
	if err := c.SetLatency(tikvtest.Latency{Read: time.Minute, Write: time.Minute}); err != nil {
		t.Fatal(err)
	}
	defer c.SetLatency(tikvtest.Latency{})
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(bg, 20*time.Millisecond) }

	ctx, cancel := short()
	err := db.Transact(ctx, engine.TxnOptions{ReadOnly: true}, func(ctx context.Context, tx engine.Txn) error {
		_, err := tx.Get(ctx, "t", []byte("r"), colA)
		return err
	})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get: %v, want the deadline's error", err)
	}

	ctx, cancel = short()
	err = db.Transact(ctx, engine.TxnOptions{ReadOnly: true}, func(ctx context.Context, tx engine.Txn) error {
		for _, err := range tx.Scan(ctx, engine.ScanOptions{Table: "t"}) {
			if err != nil {
				return err
			}
		}
		return nil
	})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Scan: %v, want the deadline's error", err)
	}

	ctx, cancel = short()
	for _, err = range db.Find(ctx, "t", nil, nil) {
		if err != nil {
			break
		}
	}
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Find: %v, want the deadline's error", err)
	}

	ctx, cancel = short()
	err = db.Transact(ctx, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		return tx.Set("t", []byte("r"), colA, []byte("w"))
	})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, engine.ErrCommitUnknown) {
		t.Errorf("commit: %v, want the deadline's error", err)
	}
}
