package tikvengine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvengine"
)

// BenchmarkTxn measures one-cell transactions on the TiKV mock and
// reports the TiKV requests and PD timestamps each costs, to compare with
// the engine over the layered store (BENCHMARKS.md, "On TiKV"). The mock
// implements neither async commit nor 1PC: client-go falls back to two
// phases there, after drawing the PD timestamp that linearizable async
// commit wants (so "default" shows one timestamp more than "2pc" on the
// mock, and on a real cluster the one that 2PC spends on its commit
// timestamp is saved instead).
func BenchmarkTxn(b *testing.B) {
	for _, mode := range []struct {
		name string
		opts tikvengine.Options
	}{{"default", tikvengine.Options{}}, {"2pc", tikvengine.Options{DisableAsyncCommit: true, Disable1PC: true}}} {
		b.Run("write/"+mode.name, func(b *testing.B) {
			db, c := open(b, &mode.opts)
			rpcs, ts := c.RPCs(), c.Timestamps()
			b.ResetTimer()
			for i := range b.N {
				err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
					return tx.Set("t", fmt.Appendf(nil, "r%08d", i), colA, []byte("value of 24 bytes......."))
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(c.RPCs()-rpcs)/float64(b.N), "rpcs/op")
			b.ReportMetric(float64(c.Timestamps()-ts)/float64(b.N), "pd-ts/op")
		})
	}
	b.Run("read", func(b *testing.B) {
		db, c := open(b, nil)
		set(b, db, "r", colA, "value")
		rpcs, ts := c.RPCs(), c.Timestamps()
		b.ResetTimer()
		for range b.N {
			err := db.Transact(bg, engine.TxnOptions{ReadOnly: true}, func(ctx context.Context, tx engine.Txn) error {
				_, err := tx.Get(ctx, "t", []byte("r"), colA)
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(c.RPCs()-rpcs)/float64(b.N), "rpcs/op")
		b.ReportMetric(float64(c.Timestamps()-ts)/float64(b.N), "pd-ts/op")
	})
}
