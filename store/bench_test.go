package store_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// BenchmarkApply measures single-cell puts on distinct rows from parallel
// goroutines, on a real disk, with and without waiting for fsync. The
// synced-x16 case runs 16 goroutines per CPU to show group commit: concurrent
// synced writes on different rows share fsyncs.
func BenchmarkApply(b *testing.B) {
	for _, bc := range []struct {
		name        string
		noSync      bool
		parallelism int
	}{{"synced", false, 1}, {"synced-x16", false, 16}, {"nosync", true, 1}} {
		noSync := bc.noSync
		b.Run(bc.name, func(b *testing.B) {
			b.SetParallelism(bc.parallelism)
			db, err := store.Open(b.TempDir(), &store.Options{Logger: quietLogger})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			value := make([]byte, 100)
			var seq atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					row := binary.BigEndian.AppendUint64([]byte("row"), n)
					res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: row, NoSync: noSync,
						Mutations: []store.Mutation{{Column: col("data", "v"), Ts: n, Value: value}}})
					if err != nil || !res.Applied {
						b.Fatal(res, err)
					}
				}
			})
		})
	}
}

// BenchmarkReadRow measures reading the newest version of a column (as the
// transaction layer does for every read) on random rows with several older
// versions each, from parallel goroutines.
func BenchmarkReadRow(b *testing.B) {
	const rows, versions = 10000, 5
	db, err := store.Open(b.TempDir(), &store.Options{Logger: quietLogger, Durability: store.DurabilityNone})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value := make([]byte, 100)
	for r := range rows {
		row := []byte(fmt.Sprintf("row%06d", r))
		var muts []store.Mutation
		for v := range versions {
			muts = append(muts, store.Mutation{Column: col("data", "v"), Ts: uint64(10 * (v + 1)), Value: value})
		}
		if _, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: row, Mutations: muts}); err != nil {
			b.Fatal(err)
		}
	}
	cols := []store.Column{col("data", "v")}
	spans := []store.Span{{MaxTs: ^uint64(0), Limit: 1}}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
		for pb.Next() {
			row := []byte(fmt.Sprintf("row%06d", rng.IntN(rows)))
			cells, err := db.ReadRow(ctx, "t", row, cols, spans)
			if err != nil || len(cells) != 1 {
				b.Fatal(cells, err)
			}
		}
	})
}
