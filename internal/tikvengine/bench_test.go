package tikvengine_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvengine"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// BenchmarkTxn measures one-cell transactions on the TiKV mock and
// reports the TiKV requests and PD timestamps each costs: "default" as a
// lease-less writer commits (async commit and one-phase commit, which
// tikvtest's mock runs as a cluster does), "2pc" as runners commit.
// BENCHMARKS.md, "On the TiKV mock", has the figures.
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

// BenchmarkImport imports 50k cells of about 200 bytes (10 MB) per
// operation on the TiKV mock, each into a table of its own, with batches
// of the default size (8 MiB, the cap) and of 1 MiB, the latter also with
// a data centre's latency, and reports cells/s, MB/s and the batches each
// import committed.
func BenchmarkImport(b *testing.B) {
	const cells = 50_000
	value := make([]byte, 200)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	for _, mode := range []struct {
		chunk   int
		latency tikvtest.Latency
	}{{32 << 20, tikvtest.Latency{}}, {1 << 20, tikvtest.Latency{}}, {1 << 20, tikvtest.DataCentre}} {
		name := fmt.Sprintf("chunk=%dKiB", mode.chunk>>10)
		if mode.latency != (tikvtest.Latency{}) {
			name += "/datacentre"
		}
		chunk := mode.chunk
		b.Run(name, func(b *testing.B) {
			db := openOn(b, tikvtest.New(b, &tikvtest.Options{Latency: mode.latency}), nil)
			var bytes int64
			for i := range cells {
				bytes += int64(len(fmt.Sprintf("r%08d", i/4)) + 2 + len(value))
			}
			b.SetBytes(bytes)
			batches := db.ImportBatches()
			n := 0
			b.ResetTimer()
			for b.Loop() {
				table := fmt.Sprintf("bench%d", n)
				n++
				err := db.Import(bg, engine.ImportOptions{Tables: []string{table}, ChunkBytes: chunk}, func(ctx context.Context, im engine.Importer) error {
					for i := range cells {
						col := engine.Column{Family: "f", Qualifier: string(rune('a' + i%4))}
						if err := im.Set(table, fmt.Appendf(nil, "r%08d", i/4), col, value); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cells*n)/b.Elapsed().Seconds(), "cells/s")
			b.ReportMetric(float64(db.ImportBatches()-batches)/float64(n), "batches/op")
		})
	}
}
