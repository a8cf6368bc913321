package webindex_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"time"

	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
)

// benchPageRankPages sizes BenchmarkPageRankCost's corpus: PageRank costs
// many observer transactions per page, so it is smaller than benchPages.
var benchPageRankPages = 2000

// BenchmarkPageRankCost measures what maintaining PageRank costs per
// changed page: a generated corpus is loaded and indexed, then changed by
// generated steps of 1% of its pages (edits, link changes, adds, deletes),
// each applied and indexed until nothing is pending, with PageRank off and
// on (tolerance 1e-3, the default). Reported per changed page: observer
// transactions, wall time and CPU time; and for the first load, observer
// transactions per page. Run with -benchtime=1x.
func BenchmarkPageRankCost(b *testing.B) {
	for _, pr := range []bool{false, true} {
		b.Run(fmt.Sprintf("pagerank=%v", pr), func(b *testing.B) {
			opts := &webindex.Options{}
			if pr {
				opts.PageRank = &webindex.PageRankOptions{}
			}
			for b.Loop() {
				b.StopTimer()
				c := sample.Generate(5, benchPageRankPages)
				p := parseCorpus(b, corpusDocs(5, benchPageRankPages))
				e, closeEnv := newBenchEnvWith(b, 5*time.Millisecond, opts)
				began := time.Now()
				e.loadAll(b, p.pages)
				e.settle(b)
				loadTook, loadTxns := time.Since(began), e.fw.Stats().Runs
				var changes int
				var took, cpu time.Duration
				txns0 := e.fw.Stats().Runs
				for step := range 5 {
					batch := c.Step(int64(50+step), 0.01)
					b.StartTimer()
					began, cpu0 := time.Now(), cpuTime()
					e.apply(b, batch)
					e.settle(b)
					took += time.Since(began)
					cpu += cpuTime() - cpu0
					b.StopTimer()
					changes += len(batch)
				}
				s := e.fw.Stats()
				b.ReportMetric(float64(loadTxns)/float64(len(p.pages)), "load-txns/page")
				b.ReportMetric(loadTook.Seconds()*1000/float64(len(p.pages)), "load-ms/page")
				b.ReportMetric(float64(s.Runs-txns0)/float64(changes), "txns/change")
				b.ReportMetric(float64(took.Microseconds())/1000/float64(changes), "ms/change")
				b.ReportMetric(float64(cpu.Microseconds())/1000/float64(changes), "cpu-ms/change")
				b.Logf("GOMAXPROCS %d, %d pages, %d changes, %d conflicts of %d commits", runtime.GOMAXPROCS(0), len(p.pages), changes, s.Conflicts, s.Committed)
				closeEnv()
				b.StartTimer()
			}
		})
	}
}

// apply writes a step's changes, one transaction each.
func (e *benchEnv) apply(b *testing.B, changes []sample.Change) {
	for _, ch := range changes {
		err := e.db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
			if ch.Op == sample.Delete {
				_, err := webindex.DeletePage(ctx, tx, ch.URL)
				return err
			}
			p, err := extract.Parse(ch.URL, bytes.NewReader(ch.HTML), sample.MaxBody)
			if err != nil {
				return err
			}
			_, err = webindex.PutPage(ctx, tx, p)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
