package framework_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// The tests of this file check one rule: the engine a DB runs is chosen
// on purpose (Options.Engine, or the store's declaration), never guessed
// from the type of the store Open is given, and a DB never runs an
// engine other than the one the store's data belongs to.

// decorated is a decorator of a store that does not say what it wraps,
// as a metrics wrapper written against store.Store is.
type decorated struct{ store.Store }

// unwrapping is a decorator that says what it wraps.
type unwrapping struct{ store.Store }

func (u unwrapping) Unwrap() store.Store { return u.Store }

// tikvWithRow returns a store on a fresh mock TiKV cluster, and writes a
// row through a DB opened on it as its declaration asks (TiKV's own
// transactions).
func tikvWithRow(t *testing.T) *tikv.Store {
	t.Helper()
	st := tikvtest.New(t, nil).Open(t, nil)
	db, err := framework.Open(context.Background(), st, st.Oracle(), &framework.Options{Observers: framework.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("t", []byte("r"), colA, []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	return st
}

// sees reports whether db reads the row tikvWithRow wrote.
func sees(t *testing.T, db *framework.DB) bool {
	t.Helper()
	var found bool
	if err := db.View(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		var err error
		_, found, err = tx.Lookup(ctx, "t", []byte("r"), colA)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// Rule: a decorator of a TiKV store that does not unwrap gets no engine
// by its type. Open with the default engine fails, naming both engines,
// rather than run the protocol's engine in a key space where none of the
// deployment's writes are.
func TestOpenRefusesADecoratedTiKVStoreWhoseEngineItCannotRun(t *testing.T) {
	st := tikvWithRow(t)
	_, err := framework.Open(context.Background(), decorated{st}, st.Oracle(), &framework.Options{Observers: framework.NewRegistry()})
	if !errors.Is(err, framework.ErrEngineMismatch) {
		t.Fatalf("Open on a decorated TiKV store whose data is TiKV's: %v, want ErrEngineMismatch", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"tikv"`) || !strings.Contains(msg, `"protocol"`) {
		t.Errorf("the error does not name both engines: %v", err)
	}
	// Asking for TiKV's engine on it fails too: nothing says which TiKV
	// store the decorator wraps.
	_, err = framework.Open(context.Background(), decorated{st}, st.Oracle(), &framework.Options{Engine: framework.EngineTiKV, Observers: framework.NewRegistry()})
	if !errors.Is(err, framework.ErrEngineMismatch) {
		t.Fatalf("Open with EngineTiKV on a store that is not TiKV's: %v, want ErrEngineMismatch", err)
	}
}

// Rule: a decorator that unwraps runs the engine of the store it wraps,
// by default or when asked, and so sees the deployment's writes.
func TestADecoratorThatUnwrapsRunsTheWrappedStoresEngine(t *testing.T) {
	st := tikvWithRow(t)
	for _, e := range []framework.Engine{framework.EngineDefault, framework.EngineTiKV} {
		db, err := framework.Open(context.Background(), unwrapping{st}, st.Oracle(), &framework.Options{Engine: e, Observers: framework.NewRegistry()})
		if err != nil {
			t.Fatalf("Engine %q: %v", e, err)
		}
		if !sees(t, db) {
			t.Errorf("Engine %q: a DB over an unwrapping decorator does not see what the TiKV engine committed", e)
		}
	}
}

// Rule: the first DB on a store records its engine, and a DB that would
// run another afterwards fails, whichever way it was chosen.
func TestOpenRefusesAnEngineOtherThanTheStoresData(t *testing.T) {
	ctx := context.Background()
	st := tikvtest.New(t, nil).Open(t, nil)
	reg := framework.NewRegistry()
	if _, err := framework.Open(ctx, st, st.Oracle(), &framework.Options{Engine: framework.EngineProtocol, Observers: reg}); err != nil {
		t.Fatal(err)
	}
	if _, err := framework.Open(ctx, st, st.Oracle(), &framework.Options{Observers: reg}); !errors.Is(err, framework.ErrEngineMismatch) {
		t.Fatalf("Open with the store's declared engine on a store whose data is the protocol's: %v, want ErrEngineMismatch", err)
	}
	if _, err := framework.Open(ctx, st, st.Oracle(), &framework.Options{Engine: framework.EngineProtocol, Observers: reg}); err != nil {
		t.Fatalf("Open with the store's own engine again: %v", err)
	}

	pebble := memStore(t, vfs.NewMem())
	defer pebble.Close()
	if _, err := framework.Open(ctx, pebble, memOracle(t), &framework.Options{Engine: framework.EngineTiKV, Observers: reg}); !errors.Is(err, framework.ErrEngineMismatch) {
		t.Fatalf("Open with EngineTiKV on a pebble store: %v, want ErrEngineMismatch", err)
	}
	if _, err := framework.Open(ctx, pebble, memOracle(t), &framework.Options{Engine: "percolator", Observers: reg}); !errors.Is(err, framework.ErrInvalidOptions) {
		t.Fatalf("Open with an engine nobody has: %v, want ErrInvalidOptions", err)
	}
}
