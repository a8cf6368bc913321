package runner

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/framework/oracle"
	"github.com/trickle-dev/trickle/remote/remotetest"
	"github.com/trickle-dev/trickle/store"
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
