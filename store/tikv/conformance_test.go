package tikv_test

import (
	"testing"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// TestConformanceOneRegion runs the store conformance suite on a mock
// cluster of one region.
func TestConformanceOneRegion(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openMock(t, mockOptions{}) })
}

// TestConformanceRegions runs it on a mock cluster split into many
// regions, inside tables, between rows and at every group boundary, with
// small scan batches so that scans page across region boundaries.
func TestConformanceRegions(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		mo := mockOptions{splits: regionSplits()}
		mo.opts.ScanBatchSize = 3
		return openMock(t, mo)
	})
}
