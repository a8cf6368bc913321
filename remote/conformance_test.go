package remote

import (
	"fmt"
	"testing"

	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// TestConformance runs the store conformance suite on clients of a pebble
// store served over NATS, with scan pages of several sizes (the default,
// and so small that pages end inside columns and rows): the client must
// behave as the store it reaches, errors included.
func TestConformance(t *testing.T) {
	for _, cells := range []int{0, 1, 2, 7} {
		t.Run(fmt.Sprintf("page%d", cells), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) store.Store {
				return newStoreEnv(t, nil, &ClientOptions{ScanPageCells: cells}).client
			})
		})
	}
	// A service with its oracle serves the calls that draw timestamps.
	t.Run("oracle", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store {
			or, err := oracle.NewServer(oracle.NewMemPersister(0), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { or.Close() })
			return newStoreEnv(t, &ServiceOptions{Oracle: or}, nil).client
		})
	})
}
