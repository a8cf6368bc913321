package webindex_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// benchEnv is an on-disk deployment like a runner's: unsynced store on
// disk, default scanner settings except where a benchmark says.
type benchEnv struct {
	fw *frameworktest.Env
	// others are more runner nodes on the same store, if any: the load
	// is spread over all of them, and their commits wake each other.
	others []*frameworktest.Env
	// cluster is the mock TiKV cluster the store is on, nil on pebble.
	cluster *tikvtest.Cluster
	st      store.Store
	db      *framework.DB
	reg     *framework.Registry
	ix      *webindex.Index
	// pages writes the pages as the loader does.
	pages webindex.PageWriter
}

func newBenchEnv(b *testing.B, idleWait time.Duration) (*benchEnv, func()) {
	return newBenchEnvWith(b, idleWait, nil)
}

// newBenchEnvWith is newBenchEnv with an index built from opts.
func newBenchEnvWith(b *testing.B, idleWait time.Duration, opts *webindex.Options) (*benchEnv, func()) {
	st, err := store.Open(b.TempDir(), framework.StoreOptions(&store.Options{Logger: indextest.Quiet, Durability: store.DurabilityNone}))
	if err != nil {
		b.Fatal(err)
	}
	return newBenchEnvOn(b, st, idleWait, opts)
}

// newBenchEnvOn is newBenchEnvWith on st, which its close function closes.
func newBenchEnvOn(b *testing.B, st store.Store, idleWait time.Duration, opts *webindex.Options) (*benchEnv, func()) {
	ix, err := webindex.New(benchOptions(opts))
	if err != nil {
		b.Fatal(err)
	}
	return newBenchEnvWithIndexOn(b, st, idleWait, ix)
}

// newBenchEnvWithIndexOn is newBenchEnvOn running ix.
func newBenchEnvWithIndexOn(b *testing.B, st store.Store, idleWait time.Duration, ix *webindex.Index) (*benchEnv, func()) {
	reg := framework.NewRegistry()
	if err := ix.Register(reg); err != nil {
		b.Fatal(err)
	}
	fw, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{Store: st, Workers: 16, Scanners: 4, IdleWait: idleWait, Logger: indextest.Quiet})
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{fw: fw, st: st, db: fw.DB(), reg: reg, ix: ix}, func() {
		fw.Close()
		st.Close()
	}
}

// parsed is a corpus parsed once, outside the timed part.
type parsed struct {
	pages []*extract.Page
	links int
}

func parseCorpus(b *testing.B, docs []sample.Doc) parsed {
	var p parsed
	for _, d := range docs {
		pg, err := extract.Parse(d.URL, bytes.NewReader(d.HTML), sample.MaxBody)
		if err != nil {
			b.Fatal(err)
		}
		p.pages = append(p.pages, pg)
		p.links += len(pg.Links)
	}
	return p
}

// loadAll writes pages in transactions of 32 pages from 4 goroutines, as
// the loader does by default, through a PageWriter as the loader does.
func (e *benchEnv) loadAll(b *testing.B, pages []*extract.Page) {
	e.loadWith(b, pages, e.pages.PutPage)
}

// loadWith is loadAll writing each page with put.
func (e *benchEnv) loadWith(b *testing.B, pages []*extract.Page, put func(context.Context, *framework.Txn, *extract.Page) (webindex.Change, error)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	nodes := e.nodes()
	for g := range 4 {
		db := nodes[g%len(nodes)].DB()
		wg.Go(func() {
			for {
				i := int(next.Add(32)) - 32
				if i >= len(pages) {
					return
				}
				batch := pages[i:min(i+32, len(pages))]
				err := db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
					for _, p := range batch {
						if _, err := put(ctx, tx, p); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// nodes are the deployment's runner nodes.
func (e *benchEnv) nodes() []*frameworktest.Env {
	return append([]*frameworktest.Env{e.fw}, e.others...)
}

// stats sums the nodes' counters.
func (e *benchEnv) stats() frameworktest.Stats {
	var t frameworktest.Stats
	for _, n := range e.nodes() {
		s := n.Stats()
		t.Runs += s.Runs
		t.Skipped += s.Skipped
		t.Failures += s.Failures
		t.Committed += s.Committed
		t.Conflicts += s.Conflicts
	}
	return t
}

func (e *benchEnv) settle(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := e.fw.WaitForObservers(ctx); err != nil {
		b.Fatal(err)
	}
}

// benchRecomputeDelay, if set, is the benchmarks' RecomputeDelay.
var benchRecomputeDelay = flag.Duration("webindex.recompute-delay", 0, "the benchmarks' Options.RecomputeDelay (0: the default)")

// benchOptions returns opts (nil: the defaults) with -webindex.recompute-delay.
func benchOptions(opts *webindex.Options) *webindex.Options {
	var o webindex.Options
	if opts != nil {
		o = *opts
	}
	if o.RecomputeDelay == 0 {
		o.RecomputeDelay = *benchRecomputeDelay
	}
	return &o
}

// benchPages sizes the corpora of the throughput benchmarks.
var benchPages = flag.Int("webindex.pages", 10_000, "pages in the benchmark corpora")

// incProfile, if set, names a file that receives a CPU profile of the
// first incremental phase of BenchmarkIncrementalVsRebuild only (the new
// 1 % of pages), which a whole-run profile would bury under the loads;
// the phase after the collection goes to the same name + ".aftergc".
var incProfile = flag.String("webindex.incprofile", "", "write CPU profiles of BenchmarkIncrementalVsRebuild's 1 % phases to this file and this file.aftergc")

func corpusDocs(seed int64, n int) []sample.Doc {
	return slices.Collect(sample.Generate(seed, n).All())
}

// BenchmarkIndexCorpus loads a generated corpus of 10k pages into an empty
// on-disk deployment and runs the observers until nothing is pending:
// pages/s and links/s end to end. Run with -benchtime=1x.
func BenchmarkIndexCorpus(b *testing.B) {
	benchIndexCorpus(b, func() (*benchEnv, func()) {
		return newBenchEnv(b, 5*time.Millisecond)
	})
}

// benchIndexCorpus is BenchmarkIndexCorpus on the deployments open
// makes. On a mock TiKV cluster it also reports the cluster's requests
// per page and per committed transaction, and the CPU the mock spent
// serving them (what a real cluster spends on its own machines) apart
// from the process's own. With -webindex.verify it checks, untimed, that
// the index equals the batch computation of the corpus.
func benchIndexCorpus(b *testing.B, open func() (e *benchEnv, closeEnv func())) {
	p := parseCorpus(b, corpusDocs(1, *benchPages))
	for b.Loop() {
		b.StopTimer()
		e, closeEnv := open()
		var rpc0 int64
		var srv0 time.Duration
		if e.cluster != nil {
			rpc0, srv0 = e.cluster.RPCs(), e.cluster.ServerCPU()
		}
		b.StartTimer()
		began, cpu0 := time.Now(), cpuTime()
		e.loadAll(b, p.pages)
		loaded := time.Since(began)
		e.settle(b)
		took, cpu := time.Since(began), cpuTime()-cpu0
		b.StopTimer()
		s := e.stats()
		// CPU per page is the figure to compare between runs on a busy
		// machine; the rates assume the machine to themselves.
		perPage := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(len(p.pages)) }
		b.ReportMetric(perPage(cpu), "cpu-ms/page")
		b.ReportMetric(float64(len(p.pages))/took.Seconds(), "pages/s")
		b.ReportMetric(float64(p.links)/took.Seconds(), "links/s")
		b.ReportMetric(loaded.Seconds(), "load-s")
		b.ReportMetric(float64(s.Runs), "observer-txns")
		b.ReportMetric(100*float64(s.Conflicts)/float64(max(1, s.Committed)), "conflict-%")
		if c := e.cluster; c != nil {
			rpcs, srv := c.RPCs()-rpc0, c.ServerCPU()-srv0
			b.ReportMetric(float64(rpcs)/float64(len(p.pages)), "rpcs/page")
			b.ReportMetric(float64(rpcs)/float64(max(1, s.Committed)), "rpcs/txn")
			if srv > 0 {
				b.ReportMetric(perPage(srv), "mock-cpu-ms/page")
				b.ReportMetric(perPage(cpu-srv), "client-cpu-ms/page")
			}
			b.Logf("%s", c.Summary())
		}
		b.Logf("committed %d conflicts %d ran %d skipped %d failed %d", s.Committed, s.Conflicts, s.Runs, s.Skipped, s.Failures)
		if *benchVerify {
			_, diffs, err := e.ix.Verify(context.Background(), e.db, batch.Compute(indextest.PageMap(p.pages)), nil, []string{"common", "page"}, 10)
			if err != nil {
				b.Fatal(err)
			}
			for _, d := range diffs {
				b.Error(d)
			}
			b.Logf("verified: the index equals the batch computation of %d pages", len(p.pages))
		}
		closeEnv()
		b.StartTimer()
	}
}

// benchVerify has benchIndexCorpus check the index against the batch
// computation after each run.
var benchVerify = flag.Bool("webindex.verify", false, "check the index equals the batch computation after BenchmarkIndexCorpus runs")

// BenchmarkPutPage loads a generated corpus of 10k pages as loadAll does,
// with PutPage (which reads the bulk load fence for every page) and with
// a PageWriter (which reads it once per quarter second of snapshots),
// and reports the load alone: the observers are left to catch up untimed.
func BenchmarkPutPage(b *testing.B) {
	p := parseCorpus(b, corpusDocs(1, *benchPages))
	for _, w := range []string{"PutPage", "PageWriter"} {
		b.Run(w, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				e, closeEnv := newBenchEnv(b, 5*time.Millisecond)
				put := webindex.PutPage
				if w == "PageWriter" {
					put = e.pages.PutPage
				}
				b.StartTimer()
				e.loadWith(b, p.pages, put)
				b.StopTimer()
				closeEnv()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(p.pages)), "µs/page")
		})
	}
}

// BenchmarkIncrementalVsRebuild compares adding 1% new pages to an indexed
// corpus with indexing the whole grown corpus from scratch. The 1% is
// measured twice on the same index: right after its load, when every
// counter delta folded during the load is still a dead column that
// counting steps over, and after a garbage collection (which a runner
// runs every GCInterval) removed them, with another 1% of new pages.
// The collection itself is not timed (gc-s reports it, with the
// compactions of the tables it removed much of). The first 1% is then
// measured once more on the same corpus bulk loaded (what loader -bulk
// does for a first load), which leaves no queued or folded delta.
func BenchmarkIncrementalVsRebuild(b *testing.B) {
	n := *benchPages
	docs := corpusDocs(2, n+2*(n/100))
	p := parseCorpus(b, docs)
	// The new pages are two spread-out 1% (every 102nd and the page after
	// it), not URL ranges.
	var base, added, addedAfterGC []*extract.Page
	for i, pg := range p.pages {
		switch i % 102 {
		case 100:
			added = append(added, pg)
		case 101:
			addedAfterGC = append(addedAfterGC, pg)
		default:
			base = append(base, pg)
		}
	}
	type cost struct {
		wall, cpu time.Duration
		txns      uint64
	}
	measure := func(e *benchEnv, pages []*extract.Page, profile string) cost {
		before := e.fw.Stats().Runs
		stopProfile := startProfile(b, profile)
		defer stopProfile()
		began, cpu0 := time.Now(), cpuTime()
		e.loadAll(b, pages)
		e.settle(b)
		return cost{time.Since(began), cpuTime() - cpu0, e.fw.Stats().Runs - before}
	}
	afterGCProfile := ""
	if *incProfile != "" {
		afterGCProfile = *incProfile + ".aftergc"
	}
	for b.Loop() {
		b.StopTimer()
		e, closeEnv := newBenchEnv(b, 5*time.Millisecond)
		e.loadAll(b, base)
		e.settle(b)
		inc := measure(e, added, *incProfile)
		began := time.Now()
		if _, err := admin.GC(context.Background(), e.db, 0); err != nil {
			b.Fatal(err)
		}
		gc := time.Since(began)
		incGC := measure(e, addedAfterGC, afterGCProfile)
		closeEnv()

		e, closeEnv = newBenchEnv(b, 5*time.Millisecond)
		if _, err := e.ix.BulkLoad(context.Background(), e.db, indextest.PageMap(base), nil); err != nil {
			b.Fatal(err)
		}
		e.settle(b)
		incBulk := measure(e, added, "")
		closeEnv()

		e, closeEnv = newBenchEnv(b, 5*time.Millisecond)
		full := measure(e, p.pages, "")
		closeEnv()
		b.ReportMetric(inc.wall.Seconds(), "incremental-s")
		b.ReportMetric(incGC.wall.Seconds(), "after-gc-s")
		b.ReportMetric(gc.Seconds(), "gc-s")
		b.ReportMetric(full.wall.Seconds(), "rebuild-s")
		b.ReportMetric(full.wall.Seconds()/inc.wall.Seconds(), "time-ratio")
		b.ReportMetric(full.wall.Seconds()/incGC.wall.Seconds(), "after-gc-time-ratio")
		// The CPU ratios hold on a machine busy with other work.
		b.ReportMetric(full.cpu.Seconds()/inc.cpu.Seconds(), "cpu-ratio")
		b.ReportMetric(full.cpu.Seconds()/incGC.cpu.Seconds(), "after-gc-cpu-ratio")
		b.ReportMetric(full.cpu.Seconds()/incBulk.cpu.Seconds(), "after-bulk-cpu-ratio")
		b.ReportMetric(float64(full.txns)/float64(max(1, inc.txns)), "txn-ratio")
		// The phases' own CPU, to compare a change's effect on each
		// between binaries: the ratios move with the rebuild too.
		b.ReportMetric(inc.cpu.Seconds(), "incremental-cpu-s")
		b.ReportMetric(incGC.cpu.Seconds(), "after-gc-cpu-s")
		b.ReportMetric(incBulk.cpu.Seconds(), "after-bulk-cpu-s")
		b.ReportMetric(full.cpu.Seconds(), "rebuild-cpu-s")
		b.StartTimer()
	}
}

// startProfile starts a CPU profile into path (nothing if path is empty)
// and returns what stops it.
func startProfile(b *testing.B, path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatalf("%s: %v (a whole-run -cpuprofile cannot be combined with it)", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLatency loads pages one at a time into an indexed corpus, at a
// rate the pipeline keeps up with, and measures how long each takes to
// become searchable (page observer, then cluster observer). It uses the
// runner's default scanner idle wait.
func BenchmarkLatency(b *testing.B) {
	p := parseCorpus(b, corpusDocs(3, 2000))
	for b.Loop() {
		b.StopTimer()
		e, closeEnv := newBenchEnv(b, 0)
		e.loadAll(b, p.pages)
		e.settle(b)
		var lat []time.Duration
		for i := range 100 {
			token := fmt.Sprintf("latencyprobe%d", i)
			pg := &extract.Page{URL: fmt.Sprintf("http://probe.example/%d", i), Title: token, Text: token + " " + p.pages[i].Text, Links: p.pages[i].Links}
			err := e.db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
				_, err := webindex.PutPage(ctx, tx, pg)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			began := time.Now()
			for {
				total, _, err := e.ix.Search(context.Background(), e.db, token, 1)
				if err != nil {
					b.Fatal(err)
				}
				if total == 1 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			lat = append(lat, time.Since(began))
			time.Sleep(20 * time.Millisecond)
		}
		closeEnv()
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		b.StartTimer()
	}
}

// BenchmarkPageWithManyLinks loads one page with n outlinks (a sitemap, a
// generated index) and runs the observers until it is indexed: the page
// observer's one transaction writes an inlink and a queued count on every
// target. Its cost must be linear in n (ns/link stays flat across sizes);
// 200k links once took hours.
func BenchmarkPageWithManyLinks(b *testing.B) {
	for _, n := range []int{10_000, 80_000, 200_000} {
		b.Run(fmt.Sprintf("links=%d", n), func(b *testing.B) {
			links := make([]extract.Link, n)
			for i := range links {
				links[i] = extract.Link{Target: fmt.Sprintf("http://example.org/page/%07d.html", i), Anchor: fmt.Sprintf("page %d", i)}
			}
			hub := &extract.Page{URL: "http://example.org/sitemap.html", Title: "Sitemap", Text: "sitemap of everything", Links: links}
			for b.Loop() {
				b.StopTimer()
				e, closeEnv := newBenchEnv(b, 5*time.Millisecond)
				b.StartTimer()
				e.loadAll(b, []*extract.Page{hub})
				e.settle(b)
				b.StopTimer()
				closeEnv()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/link")
		})
	}
}

// cpuTime is the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBulkLoad bulk loads a generated corpus of 10k pages into an
// empty on-disk deployment, and computes the same corpus's index in
// memory (batch.Compute), and reports both and their ratio, and the
// compaction the load left behind. Run with -benchtime=1x.
func BenchmarkBulkLoad(b *testing.B) {
	p := parseCorpus(b, corpusDocs(1, *benchPages))
	pages := indextest.PageMap(p.pages)
	for b.Loop() {
		b.StopTimer()
		e, closeEnv := newBenchEnv(b, 5*time.Millisecond)
		runtime.GC()
		b.StartTimer()
		began, cpu0 := time.Now(), cpuTime()
		if _, err := e.ix.BulkLoad(context.Background(), e.db, pages, nil); err != nil {
			b.Fatal(err)
		}
		bulk, bulkCPU := time.Since(began), cpuTime()-cpu0
		b.StopTimer()
		// What the load leaves the store to compact, which pebble would
		// do in the background after it, against the observers' work:
		// the CPU of compacting the whole default group now (untimed).
		cpu0 = cpuTime()
		if err := e.st.(*store.DB).CompactGroup(context.Background(), store.DefaultGroup); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric((cpuTime() - cpu0).Seconds(), "compact-after-cpu-s")
		closeEnv()
		runtime.GC()
		began, cpu0 = time.Now(), cpuTime()
		want := batch.Compute(pages)
		compute, computeCPU := time.Since(began), cpuTime()-cpu0
		if want.Len() != len(pages) {
			b.Fatalf("batch indexed %d pages of %d", want.Len(), len(pages))
		}
		b.ReportMetric(bulk.Seconds(), "bulk-s")
		b.ReportMetric(compute.Seconds(), "batch-s")
		b.ReportMetric(bulk.Seconds()/compute.Seconds(), "bulk/batch")
		// The CPU ratio holds on a machine busy with other work.
		b.ReportMetric(bulkCPU.Seconds()/computeCPU.Seconds(), "bulk/batch-cpu")
		b.ReportMetric(float64(len(pages))/bulk.Seconds(), "pages/s")
		b.StartTimer()
	}
}

// BenchmarkClusterRecompute measures what the cluster observer reads on
// every run (the cluster's state and members, their inlink counts and
// queued deltas) on an indexed corpus of 2,000 pages, one cluster per
// op, round robin. Nothing changed since the clusters were computed, so a
// run writes nothing, and each op's transaction is rolled back: what is
// measured is the reads, the cost every recompute pays before it knows
// whether anything changed.
func BenchmarkClusterRecompute(b *testing.B) {
	p := parseCorpus(b, corpusDocs(4, 2000))
	e, closeEnv := newBenchEnv(b, 5*time.Millisecond)
	defer closeEnv()
	e.loadAll(b, p.pages)
	e.settle(b)
	seen := map[string]bool{}
	var keys []string
	for _, pg := range p.pages {
		if k := schema.ClusterKey(pg); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	errRollback := errors.New("rolled back")
	ctx := context.Background()
	i := 0
	for b.Loop() {
		key := keys[i%len(keys)]
		i++
		err := e.db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			if err := e.ix.Recompute(ctx, tx, key); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			b.Fatal(err)
		}
	}
}
