package webindex_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/tikv/client-go/v2/oracle"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
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
	if indextest.RaceEnabled || testing.Short() {
		pages = 40
	}
	c := tikvtest.New(t, nil)
	runIncremental(t, indextest.NewOn(t, c.Open(t, nil)), pages)
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

// tikvTwoPhase has the mock commit every transaction in two phases, as
// runners do (their lease check needs the step between the prewrites and
// the commit point); the engines of the benchmark hold no lease, so by
// default they commit in one phase or asynchronously as a loader does.
var tikvTwoPhase = flag.Bool("webindex.tikv-two-phase", false, "commit every transaction in two phases in the TiKV benchmarks, as leased runners do")

// tikvWorkers is the observer transactions in flight per runner node on
// TiKV, where a transaction waits on round trips more than on CPU: the
// runner's default there.
var tikvWorkers = flag.Int("webindex.tikv-workers", 64, "observer transactions in flight per runner node in the TiKV benchmarks")

// tikvGC is how often the TiKV benchmarks collect, as a runner fleet on
// TiKV does by default (without it, every version stays in the mock).
var tikvGC = flag.Duration("webindex.tikv-gc", 5*time.Second, "collect this often in the TiKV benchmarks (0: never)")

// collectEvery collects the cluster every interval, as the runners do:
// up to a second ago or the oldest transaction any node runs, whichever
// is older. It returns the function that stops it.
func collectEvery(b *testing.B, c *tikvtest.Cluster, envs []*frameworktest.Env, interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now, err := c.KV.CurrentTimestamp(oracle.GlobalTxnScope)
			if err != nil {
				continue
			}
			sp := oracle.ComposeTS(oracle.ExtractPhysical(now)-1000, 0)
			for _, e := range envs {
				if ts := admin.OldestActive(e.DB()); ts != 0 && ts < sp {
					sp = ts
				}
			}
			if _, err := admin.GC(ctx, envs[0].DB(), sp); err != nil && ctx.Err() == nil {
				b.Logf("gc up to %d: %v", sp, err)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// benchOnTiKV runs benchIndexCorpus on nodes runner nodes sharing a mock
// cluster with latency lat (nil: none).
func benchOnTiKV(b *testing.B, nodes int, lat *tikvtest.Latency) {
	benchIndexCorpus(b, func() (*benchEnv, func()) {
		o := &tikvtest.Options{MeasureServerCPU: true, TwoPhaseOnly: *tikvTwoPhase}
		if lat != nil {
			o.Latency = *lat
		}
		c := tikvtest.New(b, o)
		ix, err := webindex.New(benchOptions(nil))
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
				Store: st, Workers: *tikvWorkers, Scanners: 4, IdleWait: 5 * time.Millisecond, Logger: indextest.Quiet, Notified: wake(i), Locks: locks,
			})
			if err != nil {
				b.Fatal(err)
			}
			envs[i] = e
		}
		e := &benchEnv{fw: envs[0], others: envs[1:], cluster: c, st: first, db: envs[0].DB(), reg: reg, ix: ix}
		stop := collectEvery(b, c, envs, *tikvGC)
		return e, func() {
			stop()
			for _, e := range envs {
				e.Close()
			}
		}
	})
}
