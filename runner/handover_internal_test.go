package runner

import (
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
