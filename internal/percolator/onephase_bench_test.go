package percolator

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkReadsBesideCommits measures commits and the reads beside them:
// while writers commit one-cell transactions without pause on the synced
// on-disk store of Figure 8, read-only transactions of one cell run as
// fast as they can. Only a reader of a row being written waits for a
// commit: for the pending one-phase write to be visible, or for the
// outcome of the lock a two-phase commit left. Compare read-ops/s and
// commits/s between one-phase and two-phase, in one run.
func BenchmarkReadsBesideCommits(b *testing.B) {
	for _, mode := range []string{"one-phase", "two-phase"} {
		b.Run(mode, func(b *testing.B) {
			e, _ := fig8Env(b)
			e.or = e.srv
			writer := e.db(b, "writer", func(o *Options) { o.DisableOnePhase = mode == "two-phase" })
			reader := e.db(b, "reader", nil)
			ctx := context.Background()
			const rows = benchRows
			row, value := benchRow, benchValue
			seedRows(b, writer, "t", colA)
			var stop atomic.Bool
			var commits atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for !stop.Load() {
						if err := writer.Update(ctx, func(ctx context.Context, tx *Txn) error {
							return tx.Set("t", row(rand.N(rows)), colA, value)
						}); err != nil {
							b.Error(err)
							return
						}
						commits.Add(1)
					}
				})
			}
			b.SetParallelism(8)
			began := time.Now()
			c0 := commits.Load()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := reader.View(ctx, func(ctx context.Context, tx *Txn) error {
						_, err := tx.Get(ctx, "t", row(rand.N(rows)), colA)
						return err
					}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			took := time.Since(began)
			b.ReportMetric(float64(b.N)/took.Seconds(), "read-ops/s")
			b.ReportMetric(float64(commits.Load()-c0)/took.Seconds(), "commits/s")
			stop.Store(true)
			wg.Wait()
		})
	}
}
