package webindex_test

import (
	"testing"
	"time"

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
// region, in memory, in process), with the TiKV RPCs per page and per
// committed transaction (logged by type). Run with -benchtime=1x and a -webindex.pages that
// fits the mock (1000 or so).
func BenchmarkIndexCorpusOnTiKV(b *testing.B) {
	benchIndexCorpus(b, func() (*benchEnv, func(), func() int64) {
		c := tikvtest.New(b, nil)
		e, closeEnv := newBenchEnvOn(b, c.Open(b, nil), 5*time.Millisecond, nil)
		return e, func() { b.Logf("%s", c.Summary()); closeEnv() }, c.RPCs
	})
}

// BenchmarkIndexCorpusOnTiKVWithLatency is BenchmarkIndexCorpusOnTiKV on
// a simulated cluster: every request answered the latency of a cluster in
// one data centre later (tikvtest.DataCentre), so that the figure shows
// what latency costs a page and how much of it the runner's concurrency
// hides. It logs where the requests went.
func BenchmarkIndexCorpusOnTiKVWithLatency(b *testing.B) {
	benchIndexCorpus(b, func() (*benchEnv, func(), func() int64) {
		c := tikvtest.New(b, &tikvtest.Options{Latency: tikvtest.DataCentre})
		e, closeEnv := newBenchEnvOn(b, c.Open(b, nil), 5*time.Millisecond, nil)
		return e, func() { b.Logf("%s", c.Summary()); closeEnv() }, c.RPCs
	})
}
