package store_test

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/store"
)

// cpuTime is the CPU time (user + system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU makes b report the CPU time per operation (of every goroutine of
// the process, pebble's background work included) from now until the
// benchmark ends: unlike ns/op, it does not grow when other processes
// compete for the CPU.
func reportCPU(b *testing.B) {
	b.ResetTimer()
	start := cpuTime()
	b.Cleanup(func() {
		b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-µs/op")
	})
}

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
			reportCPU(b)
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
	reportCPU(b)
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

// BenchmarkReadRows compares reading the newest version of a column in n
// random rows with n ReadRow calls and with one ReadRows call (one
// iterator for all rows). ns/op is per batch of n rows.
func BenchmarkReadRows(b *testing.B) {
	const rows, versions = 10000, 5
	db, err := store.Open(b.TempDir(), &store.Options{Logger: quietLogger, Durability: store.DurabilityNone})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	value := make([]byte, 100)
	for r := range rows {
		var muts []store.Mutation
		for v := range versions {
			muts = append(muts, store.Mutation{Column: col("data", "v"), Ts: uint64(10 * (v + 1)), Value: value})
		}
		if _, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte(fmt.Sprintf("row%06d", r)), Mutations: muts}); err != nil {
			b.Fatal(err)
		}
	}
	cols := []store.Column{col("data", "v")}
	spans := []store.Span{{MaxTs: ^uint64(0), Limit: 1}}
	for _, n := range []int{1, 16, 128} {
		rng := rand.New(rand.NewPCG(1, uint64(n)))
		reads := make([]store.RowRead, n)
		for i := range reads {
			reads[i] = store.RowRead{Table: "t", Row: []byte(fmt.Sprintf("row%06d", rng.IntN(rows))), Columns: cols, Spans: spans}
		}
		b.Run(fmt.Sprintf("ReadRow-x%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, r := range reads {
					if cells, err := db.ReadRow(ctx, r.Table, r.Row, r.Columns, r.Spans); err != nil || len(cells) != 1 {
						b.Fatal(cells, err)
					}
				}
			}
		})
		b.Run(fmt.Sprintf("ReadRows-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := db.ReadRows(ctx, reads)
				if err != nil || len(res) != n || len(res[n-1]) != 1 {
					b.Fatal(len(res), err)
				}
			}
		})
	}
}

// BenchmarkApplyChecks measures the row transactions of a Percolator-style
// write on rows that already hold committed versions in flushed sstables: a
// prewrite (three checks on one column: no lock, no newer write record, no
// rollback record; then a lock is written) and a commit (the lock must still
// be ours; it is replaced by a write record).
func BenchmarkApplyChecks(b *testing.B) {
	const rows, history = 10000, 8
	const kindShift = 60
	tag := func(kind, ts uint64) uint64 { return kind<<kindShift | ts }
	lockTs, maxTs := tag(4, 0), uint64(1)<<kindShift-1
	db, err := store.Open(b.TempDir(), &store.Options{Logger: quietLogger, Durability: store.DurabilityNone})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	c := col("data", "v")
	rowName := func(r int) []byte { return []byte(fmt.Sprintf("row%06d", r)) }
	for r := range rows {
		var muts []store.Mutation
		for v := range history {
			muts = append(muts, store.Mutation{Column: c, Ts: tag(3, uint64(10*(v+1))), Value: []byte("0123456789abcdef")})
		}
		if _, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: rowName(r), Mutations: muts}); err != nil {
			b.Fatal(err)
		}
	}
	if err := store.Flush(db); err != nil {
		b.Fatal(err)
	}
	var clock atomic.Uint64
	clock.Store(1000)
	b.ReportAllocs()
	reportCPU(b)
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewPCG(rand.Uint64(), 0))
		for pb.Next() {
			row := rowName(rng.IntN(rows))
			start := clock.Add(1)
			owner := binary.BigEndian.AppendUint64(nil, start)
			res, err := db.Apply(ctx, &store.RowTxn{Table: "t", Row: row, NoSync: true,
				Checks: []store.Check{
					{Column: c, MinTs: lockTs, MaxTs: lockTs, Expect: store.MustBeAbsent},
					{Column: c, MinTs: tag(3, start), MaxTs: tag(3, maxTs), Expect: store.MustBeAbsent},
					{Column: c, MinTs: tag(2, start), MaxTs: tag(2, start), Expect: store.MustBeAbsent},
				},
				Mutations: []store.Mutation{{Column: c, Ts: lockTs, Value: owner}}})
			if err != nil {
				b.Fatal(err)
			}
			if !res.Applied {
				continue // another goroutine holds the row
			}
			commit := clock.Add(1)
			res, err = db.Apply(ctx, &store.RowTxn{Table: "t", Row: row, NoSync: true,
				Checks: []store.Check{{Column: c, MinTs: lockTs, MaxTs: lockTs, ValuePrefix: owner, Expect: store.MustExist}},
				Mutations: []store.Mutation{
					{Column: c, Ts: lockTs, Delete: true},
					{Column: c, Ts: tag(3, commit), Value: owner},
				}})
			if err != nil || !res.Applied {
				b.Fatal(res, err)
			}
		}
	})
}

// BenchmarkApplyAll compares the two ways of writing the prewrites of a
// transaction of 64 rows (each: no lock of any version, then a lock and a
// data cell): one Apply per row, each its own batch and, when synced, its
// own fsync; and one ApplyAll, one batch and at most one fsync. On a real
// disk, synced and not. ns/op is per 64 rows; ns/row divides it.
func BenchmarkApplyAll(b *testing.B) {
	const n = 64
	lock, data := col("lock", ""), col("data", "v")
	value := make([]byte, 100)
	for _, mode := range []struct {
		name   string
		noSync bool
	}{{"synced", false}, {"nosync", true}} {
		for _, all := range []bool{false, true} {
			name := fmt.Sprintf("%s/Apply-x%d", mode.name, n)
			if all {
				name = fmt.Sprintf("%s/ApplyAll-%d", mode.name, n)
			}
			b.Run(name, func(b *testing.B) {
				db, err := store.Open(b.TempDir(), &store.Options{Logger: quietLogger, Durability: store.DurabilitySynced})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				txns := make([]*store.RowTxn, n)
				var start uint64
				b.ReportAllocs()
				reportCPU(b)
				for b.Loop() {
					start++
					for i := range txns {
						txns[i] = &store.RowTxn{Table: "t", Row: binary.BigEndian.AppendUint64(fmt.Appendf(nil, "row%02d/", i), start), NoSync: mode.noSync,
							Checks: []store.Check{{Column: lock, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
							Mutations: []store.Mutation{
								{Column: lock, Ts: start, Value: []byte("primary")},
								{Column: data, Ts: start, Value: value},
							}}
					}
					if all {
						res, err := db.ApplyAll(ctx, txns)
						if err != nil {
							b.Fatal(err)
						}
						for _, r := range res {
							if !r.Applied {
								b.Fatal(r)
							}
						}
						continue
					}
					for _, txn := range txns {
						if res, err := db.Apply(ctx, txn); err != nil || !res.Applied {
							b.Fatal(res, err)
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
			})
		}
	}
}
