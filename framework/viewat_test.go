package framework_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
)

// Rule: ViewAt refuses a time before the store was first opened with
// ErrSnapshotTooOld, as it refuses a time a collection thinned, whether a
// collection ran yet or not: a reader asking about a time the store cannot
// show gets one answer, not an empty store before the first collection
// and an error after it. A time since is read as usual.
func TestViewAtBeforeTheStoreIsRefused(t *testing.T) {
	before := time.Now().Add(-time.Minute)
	ctx := context.Background()
	env, err := frameworktest.Start(ctx, framework.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	db := env.DB()
	col := framework.Column{Family: "f", Qualifier: "q"}
	if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("t", []byte("r"), col, []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	ran := false
	err = db.ViewAt(ctx, framework.TimestampAt(before), func(ctx context.Context, tx *framework.Txn) error {
		ran = true
		return nil
	})
	if !errors.Is(err, framework.ErrSnapshotTooOld) || ran {
		t.Fatalf("ViewAt a minute before the store: %v (fn ran: %v), want ErrSnapshotTooOld without running fn", err, ran)
	}
	var now uint64
	if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error { now = tx.StartTs(); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := db.ViewAt(ctx, now, func(ctx context.Context, tx *framework.Txn) error {
		_, err := tx.Get(ctx, "t", []byte("r"), col)
		return err
	}); err != nil {
		t.Fatalf("ViewAt a time since the store was opened: %v", err)
	}
}
