package remote

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

// BenchmarkOracle measures timestamps per second handed to many concurrent
// callers of one process: an oracle.Client coalescing them over an
// OracleClient, over an embedded NATS server on loopback TCP, to an
// OracleService in front of an in-memory oracle.Server. ns/op is per
// timestamp; ts/s and ts/batch are reported explicitly.
func BenchmarkOracle(b *testing.B) {
	b.Run("nats", func(b *testing.B) {
		env := newOracleEnv(b, nil)
		benchCoalesced(b, env.newOracleClient(b, nil))
	})
	b.Run("nats-inproc", func(b *testing.B) {
		// The same over in-process pipes instead of loopback TCP.
		ns := startNATS(b)
		dial := func() *nats.Conn {
			nc, err := nats.Connect("", nats.InProcessServer(ns))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(nc.Close)
			return nc
		}
		svc, err := ServeOracle(dial(), newCountingOracle(b), quietService(nil))
		if err != nil {
			b.Fatal(err)
		}
		defer svc.Stop()
		oc, err := NewOracle(dial(), nil)
		if err != nil {
			b.Fatal(err)
		}
		benchCoalesced(b, oc)
	})
	b.Run("roundtrip", func(b *testing.B) {
		// One caller, one request per timestamp: the latency of a round trip.
		env := newOracleEnv(b, nil)
		c := env.newOracleClient(b, nil)
		for b.Loop() {
			if _, err := c.Reserve(bg, 1); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ts/s")
	})
}

// benchCoalesced runs many concurrent callers (512 per GOMAXPROCS, like a
// runner with many transactions in flight) through an oracle.Client over
// oc. Every caller waits for a round trip that starts after it arrived, so
// throughput is callers per round trip until the CPU runs out; on two
// cores the cost of parking and waking each caller dominates.
func benchCoalesced(b *testing.B, oc *OracleClient) {
	c, err := oracle.NewClient(oc, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.SetParallelism(512)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Timestamp(bg); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ts/s")
	st := c.Stats()
	b.ReportMetric(float64(st.Timestamps)/float64(max(st.Batches, 1)), "ts/batch")
}

// BenchmarkRemoteApply measures unsynced single-cell row transactions per
// second from many concurrent callers through one StoreClient.
func BenchmarkRemoteApply(b *testing.B) {
	env := newStoreEnv(b, nil, nil)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var i uint64
		row := make([]byte, 8)
		for pb.Next() {
			i++
			binary.BigEndian.PutUint64(row, i)
			_, err := env.client.Apply(bg, &store.RowTxn{Table: "bench", Row: row, NoSync: true,
				Checks:    []store.Check{{Column: col("lock", ""), MaxTs: ^uint64(0)}},
				Mutations: []store.Mutation{{Column: col("f", "v"), Ts: i, Value: row}}})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkRemoteReadRow measures ReadRow calls per second (the lock and
// newest-write read of a transactional Get) from many concurrent callers.
func BenchmarkRemoteReadRow(b *testing.B) {
	env := newStoreEnv(b, nil, nil)
	const nrows = 1000
	for i := range nrows {
		row := binary.BigEndian.AppendUint64(nil, uint64(i))
		if _, err := env.db.Apply(bg, &store.RowTxn{Table: "bench", Row: row,
			Mutations: []store.Mutation{{Column: col("f", "v"), Ts: 5, Value: row}, {Column: col("f", "w"), Ts: 5, Value: row}}}); err != nil {
			b.Fatal(err)
		}
	}
	cols := []store.Column{col("lock", ""), col("f", "v")}
	spans := []store.Span{{MaxTs: 100, Limit: 1}}
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var i uint64
		row := make([]byte, 8)
		for pb.Next() {
			i++
			binary.BigEndian.PutUint64(row, i%nrows)
			cells, err := env.client.ReadRow(bg, "bench", row, cols, spans)
			if err != nil || len(cells) != 1 {
				b.Errorf("%v %v", cells, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}

// BenchmarkRemoteReadRows compares, for one caller, reading n rows (the
// lock and newest write of a column each, as a transaction reading n cells
// does) with n ReadRow calls, one round trip each, and with one ReadRows
// call of n reads. ns/op is per batch of n rows; rows/s is reported too.
func BenchmarkRemoteReadRows(b *testing.B) {
	env := newStoreEnv(b, nil, nil)
	const nrows = 1000
	for i := range nrows {
		row := binary.BigEndian.AppendUint64(nil, uint64(i))
		if _, err := env.db.Apply(bg, &store.RowTxn{Table: "bench", Row: row, NoSync: true,
			Mutations: []store.Mutation{{Column: col("f", "v"), Ts: 5, Value: bytes.Repeat(row, 8)}}}); err != nil {
			b.Fatal(err)
		}
	}
	cols := []store.Column{col("lock", ""), col("f", "v")}
	spans := []store.Span{{MaxTs: 100, Limit: 1}}
	for _, n := range []int{1, 16, 128} {
		reads := make([]store.RowRead, n)
		for i := range reads {
			reads[i] = store.RowRead{Table: "bench", Row: binary.BigEndian.AppendUint64(nil, uint64(i*7%nrows)), Columns: cols, Spans: spans}
		}
		b.Run(fmt.Sprintf("ReadRow-x%d", n), func(b *testing.B) {
			for b.Loop() {
				for _, r := range reads {
					if cells, err := env.client.ReadRow(bg, r.Table, r.Row, r.Columns, r.Spans); err != nil || len(cells) != 1 {
						b.Fatal(cells, err)
					}
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "rows/s")
		})
		b.Run(fmt.Sprintf("ReadRows-%d", n), func(b *testing.B) {
			for b.Loop() {
				res, err := env.client.ReadRows(bg, reads)
				if err != nil || len(res) != n || len(res[n-1]) != 1 {
					b.Fatal(len(res), err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
