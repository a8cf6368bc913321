package tikvengine_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	tikvclient "github.com/tikv/client-go/v2/tikv"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvengine"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

var bg = context.Background()

// observed is an observed set from a map.
type observed map[store.Column]engine.Kind

func (o observed) ObservedKind(_ string, col store.Column) (engine.Kind, bool) {
	k, ok := o[col]
	return k, ok
}

var (
	colA   = store.Column{Family: "f", Qualifier: "a"}
	colB   = store.Column{Family: "f", Qualifier: "b"}
	strong = store.Column{Family: "s", Qualifier: "x"}
	weak   = store.Column{Family: "w", Qualifier: "x"}
)

// open returns an engine on a fresh mock cluster that observes strong
// strongly and weak weakly.
func open(t testing.TB, o *tikvengine.Options) (*tikvengine.DB, *tikvtest.Cluster) {
	t.Helper()
	c := tikvtest.New(t, nil)
	return openOn(t, c, o), c
}

func openOn(t testing.TB, c *tikvtest.Cluster, o *tikvengine.Options) *tikvengine.DB {
	t.Helper()
	return openClient(t, c, c.KV, o)
}

// openClient returns an engine on c through the client kv (one of c's,
// see tikvtest.Cluster.Client).
func openClient(t testing.TB, c *tikvtest.Cluster, kv *tikvclient.KVStore, o *tikvengine.Options) *tikvengine.DB {
	t.Helper()
	var opts tikvengine.Options
	if o != nil {
		opts = *o
	}
	if opts.Observed == nil {
		opts.Observed = observed{strong: engine.Strong, weak: engine.Weak}
	}
	if opts.Store == nil {
		opts.Store = c.Open(t, nil)
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	db, err := tikvengine.New(kv, &opts)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// update runs fn in a read-write transaction.
func update(t testing.TB, db *tikvengine.DB, fn func(context.Context, engine.Txn) error) {
	t.Helper()
	if err := db.Transact(bg, engine.TxnOptions{}, fn); err != nil {
		t.Fatal(err)
	}
}

// set commits one write and returns its transaction's start timestamp.
func set(t testing.TB, db *tikvengine.DB, row string, col store.Column, v string) uint64 {
	t.Helper()
	var ts uint64
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		ts = tx.StartTs()
		return tx.Set("t", []byte(row), col, []byte(v))
	})
	return ts
}

// get reads a cell in a read-only transaction at at (0: now); "" and
// false if absent.
func get(t testing.TB, db *tikvengine.DB, at uint64, row string, col store.Column) (string, bool) {
	t.Helper()
	var v []byte
	var found bool
	err := db.Transact(bg, engine.TxnOptions{ReadOnly: true, At: at}, func(ctx context.Context, tx engine.Txn) error {
		var err error
		v, err = tx.Get(ctx, "t", []byte(row), col)
		if errors.Is(err, engine.ErrNotFound) {
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(v), found
}

// find collects what Find yields for table t.
func find(t testing.TB, db *tikvengine.DB) []engine.Notification {
	t.Helper()
	var out []engine.Notification
	for n, err := range db.Find(bg, "t", nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// pending reads the pending notification of (t, row, col).
func pending(t testing.TB, db *tikvengine.DB, row string, col store.Column) *engine.Pending {
	t.Helper()
	tikvengine.ForgetRecent(db) // read what TiKV holds
	p, err := db.Pending(bg, engine.Notification{Table: "t", Row: []byte(row), Column: col})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
