package framework_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

func memStore(t *testing.T, fs vfs.FS) *store.DB {
	t.Helper()
	st, err := store.Open("db", framework.StoreOptions(&store.Options{FS: fs}))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func memOracle(t *testing.T) *oracle.Server {
	t.Helper()
	ts, err := oracle.NewServer(oracle.NewMemPersister(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	return ts
}

// A DB always knows which columns are observed: Open refuses to guess.
func TestOpenRefusesUnknownObservedColumns(t *testing.T) {
	st := memStore(t, vfs.NewMem())
	defer st.Close()
	ctx := context.Background()
	if _, err := framework.Open(ctx, st, memOracle(t), nil); !errors.Is(err, framework.ErrNoObservedColumns) {
		t.Fatalf("Open with nothing published and no observers: %v", err)
	}
	reg := framework.NewRegistry()
	if err := reg.Register(framework.Observer{Name: "o", Table: "t", Columns: []framework.Column{colA}, Kind: framework.Strong, Fn: noop}); err != nil {
		t.Fatal(err)
	}
	db, err := framework.Open(ctx, st, memOracle(t), &framework.Options{Observers: reg})
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := db.ObservedKind("t", colA); !ok || k != framework.Strong {
		t.Fatalf("the DB does not notify the registry's column: %v %v", k, ok)
	}
	if _, ok := db.ObservedKind("t", colB); ok {
		t.Fatal("the DB notifies a column nobody observes")
	}
	if _, err := framework.Open(ctx, st, memOracle(t), &framework.Options{LockTTL: -1, Observers: reg}); !errors.Is(err, framework.ErrInvalidOptions) {
		t.Fatalf("Open with a bad option: %v", err)
	}
}

// The errors that leave the framework match its own sentinels, whatever
// the engine underneath returned.
func TestErrorsMatchTheFrameworksSentinels(t *testing.T) {
	st := memStore(t, vfs.NewMem())
	defer st.Close()
	ctx := context.Background()
	db, err := framework.Open(ctx, st, memOracle(t), &framework.Options{Observers: framework.NewRegistry(), MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		_, err := tx.Get(ctx, "t", []byte("r"), colA)
		return err
	})
	if !errors.Is(err, framework.ErrNotFound) {
		t.Errorf("Get of an absent cell: %v", err)
	}
	if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error { return tx.Set("t", []byte("r"), colA, nil) }); !errors.Is(err, framework.ErrReadOnly) {
		t.Errorf("Set in a View: %v", err)
	}
	if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error { return tx.Set("__meta", []byte("r"), colA, nil) }); !errors.Is(err, framework.ErrInvalidKey) {
		t.Errorf("Set of a reserved table: %v", err)
	}
	if err := db.NotifyWeak(ctx, "t", []byte("r"), colA); !errors.Is(err, framework.ErrNotWeak) {
		t.Errorf("NotifyWeak of an unobserved column: %v", err)
	}
	// Two transactions writing one cell: the second to commit conflicts
	// (MaxAttempts 1: no retry).
	started, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var slowErr error
	wg.Go(func() {
		slowErr = db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			close(started)
			<-release
			return tx.Set("t", []byte("r"), colA, []byte("slow"))
		})
	})
	<-started
	if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("t", []byte("r"), colA, []byte("fast"))
	}); err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()
	if !errors.Is(slowErr, framework.ErrConflict) {
		t.Errorf("the later commit of a cell written meanwhile: %v, want ErrConflict", slowErr)
	}
}

// A store the framework wrote to keeps its notifications in their own
// locality group; opened without the framework's store options, it fails
// instead of hiding them.
func TestStoreOpenedWithoutFrameworkGroupsFails(t *testing.T) {
	fs := vfs.NewMem()
	st := memStore(t, fs)
	reg := framework.NewRegistry()
	if err := reg.Register(framework.Observer{Name: "o", Table: "t", Columns: []framework.Column{colA}, Kind: framework.Strong, Fn: noop}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	db, err := framework.Open(ctx, st, memOracle(t), &framework.Options{Observers: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error { return tx.Set("t", []byte("r"), colA, []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err := store.Open("db", &store.Options{FS: fs}); !errors.Is(err, store.ErrGroupLayout) {
		if err == nil {
			st.Close()
		}
		t.Fatalf("reopening without the framework's groups: %v, want ErrGroupLayout", err)
	}
}
