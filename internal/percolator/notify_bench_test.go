package percolator

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkTxnManyWeakNotifications is one transaction like the web index's
// page observer on a page with n links: a cell and a weak notification on
// each target's row. Its cost must grow linearly with n (a linear search of
// the buffered notifications once made 80k links take 28 s and 200k hours).
// Compare ns/link across sizes.
func BenchmarkTxnManyWeakNotifications(b *testing.B) {
	weakCol := Column{Family: "q", Qualifier: "w"}
	cellCol := Column{Family: "in", Qualifier: "src"}
	for _, n := range []int{10_000, 80_000, 200_000} {
		b.Run(fmt.Sprintf("links=%d", n), func(b *testing.B) {
			e := newEnv(b)
			db := e.db(b, "bench", func(o *Options) { o.Observed = observing(Weak, "t", weakCol) })
			rows := make([][]byte, n)
			for i := range rows {
				rows[i] = fmt.Appendf(nil, "http://example.org/page/%07d", i)
			}
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				if err := db.Update(ctx, func(ctx context.Context, tx *Txn) error {
					for _, r := range rows {
						if err := tx.Set("t", r, cellCol, []byte("anchor")); err != nil {
							return err
						}
						if err := tx.NotifyWeak("t", r, weakCol); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/link")
		})
	}
}
