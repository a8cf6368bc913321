package webindex_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/scanner"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// TestIncrementalEqualsBatchOnTiKV is TestIncrementalEqualsBatch on the
// TiKV mock (one region; the engine's own tests cover transactions across
// regions). The mock's in-memory engine runs some twenty times slower
// under the race detector, so a race build checks a smaller corpus.
func TestIncrementalEqualsBatchOnTiKV(t *testing.T) {
	pages := 160
	if raceEnabled || testing.Short() {
		pages = 40
	}
	c := tikvtest.New(t, nil)
	runIncremental(t, newEnvOn(t, c.Open(t, nil)), pages)
}

// BenchmarkIndexCorpusOnTiKV is BenchmarkIndexCorpus on the TiKV mock (one
// region, in memory, in process) with 1, 2 and 4 runner nodes, each on a
// client of its own (as separate processes would be), whose commits wake
// each other's scanners (as NATS does in a deployment). It reports the
// TiKV requests per page and per committed transaction (logged by type)
// and the CPU the mock spent serving them apart from the runners'. Run
// with -benchtime=1x; -webindex.verify checks the result against the
// batch computation.
func BenchmarkIndexCorpusOnTiKV(b *testing.B) {
	for _, nodes := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) { benchOnTiKV(b, nodes, nil) })
	}
}

// BenchmarkIndexCorpusOnTiKVWithLatency is BenchmarkIndexCorpusOnTiKV on
// a simulated cluster: every request answered the latency of a cluster in
// one data centre later (tikvtest.DataCentre), so that the figures show
// what latency costs a page and how much of it the runners' concurrency
// hides.
func BenchmarkIndexCorpusOnTiKVWithLatency(b *testing.B) {
	for _, nodes := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) { benchOnTiKV(b, nodes, &tikvtest.DataCentre) })
	}
}

// tikvWorkers is the observer transactions in flight per runner node on
// TiKV, where a transaction waits on round trips more than on CPU: the
// runner's default there.
var tikvWorkers = flag.Int("webindex.tikv-workers", 64, "observer transactions in flight per runner node in the TiKV benchmarks")

// benchOnTiKV runs benchIndexCorpus on nodes runner nodes sharing a mock
// cluster with latency lat (nil: none).
func benchOnTiKV(b *testing.B, nodes int, lat *tikvtest.Latency) {
	benchIndexCorpus(b, func() (*benchEnv, func()) {
		o := &tikvtest.Options{MeasureServerCPU: true}
		if lat != nil {
			o.Latency = *lat
		}
		c := tikvtest.New(b, o)
		ix, err := webindex.New(nil)
		if err != nil {
			b.Fatal(err)
		}
		reg := framework.NewRegistry()
		if err := ix.Register(reg); err != nil {
			b.Fatal(err)
		}
		envs := make([]*frameworktest.Env, nodes)
		wake := func(from int) func([]framework.NotifiedRow) {
			return func(rows []framework.NotifiedRow) {
				for i, e := range envs {
					if i != from && e != nil {
						e.Wake(rows)
					}
				}
			}
		}
		locks := scanner.NewLocalLocks() // the deployment's, as over NATS
		var first store.Store
		for i := range nodes {
			st := c.OpenProcess(b, nil)
			if i == 0 {
				first = st
			}
			e, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{
				Store: st, Workers: *tikvWorkers, Scanners: 4, IdleWait: 5 * time.Millisecond, Logger: quiet, Notified: wake(i), Locks: locks,
			})
			if err != nil {
				b.Fatal(err)
			}
			envs[i] = e
		}
		e := &benchEnv{fw: envs[0], others: envs[1:], cluster: c, st: first, db: envs[0].DB(), reg: reg, ix: ix}
		return e, func() {
			for _, e := range envs {
				e.Close()
			}
		}
	})
}
