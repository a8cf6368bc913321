package store_test

import (
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// TestConformance runs the store conformance suite on the pebble store
// itself: its scripted expectations hold, and the differential parts
// compare two pebble stores with the same history.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		db, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Durability: store.DurabilityNone,
			Groups: storetest.Groups, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return db
	})
}
