package tikvengine_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/enginetest"
	"github.com/trickle-dev/trickle/internal/tikvengine"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// TestConformance runs the engine conformance suite on client-go's mock
// cluster: without a lease (async commit and one-phase commit allowed)
// and with one (every commit two-phase, the lease checked before the
// commit point), at scan pages of 1 and 2 keys as well as the default, so
// that every page boundary falls inside the suite's scans, and on a
// cluster split into regions at the suite's SplitRows.
func TestConformance(t *testing.T) {
	for _, lease := range []bool{false, true} {
		for _, page := range []int{0, 1, 2} {
			name := fmt.Sprintf("lease=%v/page=%d", lease, page)
			if page == 0 {
				name = fmt.Sprintf("lease=%v/page=default", lease)
			}
			t.Run(name, func(t *testing.T) {
				enginetest.RunConformance(t, conformanceHarness(nil, &tikvengine.Options{ScanBatchSize: page}, lease))
			})
		}
	}
	t.Run("regions/page=2", func(t *testing.T) {
		var splits [][]byte
		for table, rows := range enginetest.SplitRows {
			for _, r := range rows {
				splits = append(splits, tikvengine.RowKey(tikvengine.DefaultNamespace, table, r))
			}
		}
		enginetest.RunConformance(t, conformanceHarness(&tikvtest.Options{SplitKeys: splits}, &tikvengine.Options{ScanBatchSize: 2}, false))
	})
}

// tikvEntryLimit is TiKV's limit on an entry (a cell's key and framed
// value), which Set enforces.
const tikvEntryLimit = 6 << 20

// conformanceHarness opens engines with base's options on mock clusters
// shaped by co; with lease, each engine opened without a Lease of its
// case's is given one that holds.
func conformanceHarness(co *tikvtest.Options, base *tikvengine.Options, lease bool) enginetest.Harness {
	newStore := func(t *testing.T, c *tikvtest.Cluster) enginetest.Opener {
		first := true
		return func(t *testing.T, cfg engine.Config) engine.Engine {
			o := *base
			// Every Find checks locks: the contract's "once the
			// commit returned" holds then (see framework's doc).
			o.LockCheckInterval = time.Nanosecond
			o.Observed, o.Guards, o.DeclaredGuards = cfg.Observed, cfg.Guards, cfg.DeclaredGuards
			o.Lease, o.Notified, o.WorkerID = cfg.Lease, cfg.Notified, cfg.WorkerID
			o.MaxAttempts, o.RetryBackoffMin, o.RetryBackoffMax = cfg.MaxAttempts, cfg.RetryBackoffMin, cfg.RetryBackoffMax
			if o.Observed == nil {
				o.Observed = observed{} // observes nothing
			}
			if lease && o.Lease == nil {
				o.Lease = enginetest.NewLease()
			}
			kv := c.KV
			if !first {
				kv = c.Client(t, nil) // another process
			}
			first = false
			return openClient(t, c, kv, &o)
		}
	}
	return enginetest.Harness{
		CellLimit: tikvEntryLimit,
		NewStore:  func(t *testing.T) enginetest.Opener { return newStore(t, tikvtest.New(t, co)) },
		NewOutageStore: func(t *testing.T) (enginetest.Opener, func(int64)) {
			c := tikvtest.New(t, co)
			return newStore(t, c), c.FailTimestamps
		},
	}
}
