package percolator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/remote"
	"github.com/trickle-dev/trickle/remote/remotetest"
	"github.com/trickle-dev/trickle/store"
)

// BenchmarkFig8 mirrors Figure 8 of the Percolator paper: the cost of the
// transaction protocol over raw store access, on the same on-disk store with
// default (synced) durability, in one run. Every sub-benchmark runs many
// concurrent clients; compare ops/s between raw and txn.
//
//	raw-read   newest version of a cell, one store read
//	txn-read   a read-only transaction reading one cell
//	txn-read-oracle  the same with its snapshot drawn from the oracle
//	           before the read, where the store could have chosen it
//	           (over NATS only: see store.TimestampReader)
//	raw-write  one synced single-row store write
//	txn-write  a transaction writing one cell, through prewrite and commit
//	txn-rmw    a transaction reading one cell and writing it back; and
//	txn-rmw-oracle  the same with its snapshot drawn from the oracle
//	           (over NATS only)
//
// Both reads run before any write, so that they read the same store.
func BenchmarkFig8(b *testing.B) {
	e, st := fig8Env(b)
	e.or = e.srv // in-process: the lock-free server, no coalescing hand-off
	fig8(b, e, st, nil, 8)
}

// fig8Env returns the on-disk store of the Figure 8 benchmarks, closed
// when b ends, and an env on it whose oracle clock follows the wall clock.
func fig8Env(b *testing.B) (*env, *store.DB) {
	st, err := store.Open(b.TempDir(), protocol.StoreOptions(&store.Options{Logger: quietLogger()}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	e := newEnvOn(b, st)
	e.clock.Set(time.Now())
	return e, st
}

// BenchmarkFig8OverNATS is BenchmarkFig8 in the setting of the paper's
// Figure 8, where the store was a remote Bigtable and timestamps came from
// a remote oracle: the same on-disk store served over NATS (loopback TCP,
// the store service and its clients in this process), timestamps from the
// oracle service through the coalescing client a runner uses. raw-read and
// raw-write are store calls through the NATS client; the transactions run
// on the same client. As in a deployment, the store and the oracle are
// served on one connection and called on another. More clients than in
// process (32 per core), since a caller now waits for round trips.
func BenchmarkFig8OverNATS(b *testing.B) {
	e, st := fig8Env(b)
	d := remotetest.Serve(b, st, e.srv)
	svc, err := remote.ServeOracle(d.Serves, e.srv, &remote.ServiceOptions{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Stop()
	ro, err := remote.NewOracle(d.Calls, nil)
	if err != nil {
		b.Fatal(err)
	}
	cl, err := oracle.NewClient(ro, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	e.st, e.or = d.Store, cl
	fig8(b, e, d.Store, nil, 32)
	if s := cl.Stats(); s.Batches > 0 {
		b.Logf("oracle: %d timestamps in %d requests (%.1f per request)", s.Timestamps, s.Batches, float64(s.Timestamps)/float64(s.Batches))
	}
}

// fig8 runs BenchmarkFig8's sub-benchmarks on st through e's oracle, with
// parallelism clients per core; rpcs, if not nil, counts the store's RPCs,
// reported per operation.
func fig8(b *testing.B, e *env, st store.Store, rpcs func() int64, parallelism int) {
	db := e.db(b, "bench", nil)
	ctx := context.Background()
	const rows = benchRows
	row, value := benchRow, benchValue
	raw := Column{Family: "raw", Qualifier: "v"}
	col := Column{Family: "txn", Qualifier: "v"}
	seedRows(b, db, "fig8", col)
	for i := range rows {
		if _, err := st.Apply(ctx, &store.RowTxn{Table: "fig8", Row: row(i), Mutations: []store.Mutation{{Column: raw, Ts: 1, Value: value}}, NoSync: true}); err != nil {
			b.Fatal(err)
		}
	}
	var rawTs uint64 = 1
	run := func(name string, op func() error) {
		b.Run(name, func(b *testing.B) {
			b.SetParallelism(parallelism)
			cpu0 := cpuTime()
			sc0 := syscallsDone()
			var rpc0 int64
			if rpcs != nil {
				rpc0 = rpcs()
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := op(); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			if sc := syscallsDone(); sc > 0 {
				b.ReportMetric(float64(sc-sc0)/float64(b.N), "rw-syscalls/op")
			}
			if rpcs != nil {
				b.ReportMetric(float64(rpcs()-rpc0)/float64(b.N), "rpcs/op")
			}
		})
	}
	run("raw-read", func() error {
		cells, err := st.ReadRow(ctx, "fig8", row(rand.N(rows)), []Column{raw}, []store.Span{{MaxTs: ^uint64(0), Limit: 1}})
		if err == nil && len(cells) != 1 {
			err = fmt.Errorf("raw read found %d cells", len(cells))
		}
		return err
	})
	run("txn-read", func() error {
		return db.View(ctx, func(ctx context.Context, tx *Txn) error {
			_, err := tx.Get(ctx, "fig8", row(rand.N(rows)), col)
			return err
		})
	})
	// plain runs the same transactions with their timestamps drawn from
	// the oracle, through a DB that does not see that the store can choose
	// them (over NATS only).
	var plain *DB
	if db.now != nil {
		plain = e.dbOn(b, struct{ store.Store }{e.st}, "bench-plain")
		run("txn-read-oracle", func() error {
			return plain.View(ctx, func(ctx context.Context, tx *Txn) error {
				_, err := tx.Get(ctx, "fig8", row(rand.N(rows)), col)
				return err
			})
		})
	}
	run("raw-write", func() error {
		_, err := st.Apply(ctx, &store.RowTxn{Table: "fig8", Row: row(rand.N(rows)), Mutations: []store.Mutation{{Column: raw, Ts: rawTs, Value: value}}})
		return err
	})
	run("txn-write", func() error {
		return db.Update(ctx, func(ctx context.Context, tx *Txn) error {
			return tx.Set("fig8", row(rand.N(rows)), col, value)
		})
	})
	if plain != nil {
		// A read-modify-write, as an observer's run: the snapshot chosen
		// by the read in the store, or drawn from the oracle first.
		rmw := func(db *DB) func() error {
			return func() error {
				return db.Update(ctx, func(ctx context.Context, tx *Txn) error {
					r := row(rand.N(rows))
					v, err := tx.Get(ctx, "fig8", r, col)
					if err != nil {
						return err
					}
					return tx.Set("fig8", r, col, v)
				})
			}
		}
		run("txn-rmw", rmw(db))
		run("txn-rmw-oracle", rmw(plain))
	}
}

// syscallsDone is the number of read and write system calls the process
// has made (0 where /proc does not tell): over NATS, an operation's cost is
// mostly these, and how many requests share one depends on how many are in
// flight together.
func syscallsDone() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	var n int64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if ok && (k == "syscr" || k == "syscw") {
			c, _ := strconv.ParseInt(v, 10, 64)
			n += c
		}
	}
	return n
}

// cpuTime is the CPU time (user + system) the process has used, to report
// what an operation costs in CPU besides its latency.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The rows of the Figure 8 benchmarks: benchRows rows named by benchRow,
// each cell holding benchValue.
const benchRows = 10000

var benchValue = []byte("0123456789abcdef0123456789abcdef")

func benchRow(i int) []byte { return []byte(fmt.Sprintf("row%06d", i)) }

// seedRows writes benchValue into column c of benchRows rows of table, in
// transactions of 500 rows.
func seedRows(b *testing.B, db *DB, table string, c Column) {
	for lo := 0; lo < benchRows; lo += 500 {
		if err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
			for i := lo; i < lo+500; i++ {
				if err := tx.Set(table, benchRow(i), c, benchValue); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
