package runner

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/remote/remotetest"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// The store a node hands out lets the owner's store service choose
// timestamps while the node is a client, and stops offering it once the
// node uses its own pebble store, so that the owner's transactions start
// the usual way.
func TestHandoverStoreChoosesTimestampsOnlyThroughTheOwner(t *testing.T) {
	local, err := store.Open("", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	or, err := oracle.NewServer(oracle.NewMemPersister(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer or.Close()
	h := newHandoverStore(remotetest.Serve(t, local, or).Store)
	if !h.ChoosesTimestamps() {
		t.Fatal("through the owner's store service: ChoosesTimestamps false")
	}
	h.set(local)
	if h.ChoosesTimestamps() {
		t.Fatal("on its own pebble store: ChoosesTimestamps true")
	}
}

// The store a node hands out ingests through whichever store it uses, the
// owner's over NATS or its own, and refuses (errors.ErrUnsupported, so
// that an import writes with ApplyAll) on one that cannot ingest.
func TestHandoverStoreIngests(t *testing.T) {
	local, err := store.Open("", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	ctx := context.Background()
	write := func(row string) []*store.RowTxn {
		return []*store.RowTxn{{Table: "t", Row: []byte(row), Mutations: []store.Mutation{{Column: store.Column{Family: "f", Qualifier: "q"}, Ts: 5, Value: []byte(row)}}}}
	}
	h := newHandoverStore(remotetest.Serve(t, local, nil).Store)
	if err := h.Ingest(ctx, write("remote")); err != nil {
		t.Fatalf("Ingest through the owner's store service: %v", err)
	}
	h.set(local)
	if err := h.Ingest(ctx, write("local")); err != nil {
		t.Fatalf("Ingest into its own store: %v", err)
	}
	for _, row := range []string{"remote", "local"} {
		if got, err := local.ReadRow(ctx, "t", []byte(row), []store.Column{{Family: "f", Qualifier: "q"}}, nil); err != nil || len(got) != 1 {
			t.Fatalf("row %s: %d cells, %v", row, len(got), err)
		}
	}
	h.set(struct{ store.Store }{local}) // a store without Ingest
	if err := h.Ingest(ctx, write("neither")); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Ingest on a store without it: %v, want errors.ErrUnsupported", err)
	}
}

// The store a node hands out passes the store conformance suite, its
// capabilities included, whether it forwards to a pebble store of its
// own or to the owner's over NATS (whose service has its oracle).
func TestHandoverStoreConformance(t *testing.T) {
	local := func(t *testing.T) *store.DB {
		db, err := store.Open("", &store.Options{FS: vfs.NewMem(), Durability: store.DurabilityNone, Groups: storetest.Groups})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	t.Run("own", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			db := local(t)
			return closingHandover{newHandoverStore(db), db.Close}
		})
	})
	t.Run("owner's", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			or, err := oracle.NewServer(oracle.NewMemPersister(0), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { or.Close() })
			client := remotetest.Serve(t, local(t), or).Store
			return closingHandover{newHandoverStore(client), client.Close}
		})
	})
}

// closingHandover closes the store a handover store forwards to when it
// is closed (a node does it when it closes), so that the suite sees what
// calls do once the store is closed.
type closingHandover struct {
	*handoverStore
	close func() error
}

func (c closingHandover) Close() error { return c.close() }
