package webindex_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/internal/pgtest"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/store"
)

// BenchmarkIndexCorpusExport is BenchmarkIndexCorpus with the canonical
// table exported and without, in the same run: no-rows (the index as it
// was before it kept each page's row of the canonical table), off (each
// page's row is kept, nothing exported) and jetstream (every row change exported through
// the queue into a JetStream stream on a file store, as runner -export
// jetstream does), timed until the last entry is in the stream, and
// postgres (the same into a PostgreSQL table of a server the benchmark
// starts, as runner -export postgres does; skipped without one). Run with
// -benchtime=1x.
func BenchmarkIndexCorpusExport(b *testing.B) {
	b.Run("no-rows", func(b *testing.B) {
		benchIndexCorpus(b, func() (*benchEnv, func()) {
			st, err := store.Open(b.TempDir(), framework.StoreOptions(&store.Options{Logger: indextest.Quiet, Durability: store.DurabilityNone}))
			if err != nil {
				b.Fatal(err)
			}
			ix, err := webindex.NewWithoutRows(nil)
			if err != nil {
				b.Fatal(err)
			}
			e, closeEnv := newBenchEnvWithIndexOn(b, st, 5*time.Millisecond, ix)
			return e, closeEnv
		})
	})
	b.Run("off", func(b *testing.B) {
		benchIndexCorpus(b, func() (*benchEnv, func()) {
			e, closeEnv := newBenchEnvWith(b, 5*time.Millisecond, nil)
			return e, closeEnv
		})
	})
	b.Run("jetstream", func(b *testing.B) {
		var sink *export.JetStreamSink
		benchIndexCorpus(b, func() (*benchEnv, func()) {
			srv, err := cluster.StartEmbedded(cluster.EmbeddedOptions{Port: -1, InsecureNoAuth: true, DataDir: b.TempDir(),
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			nc, err := nats.Connect(srv.ClientURL())
			if err != nil {
				b.Fatal(err)
			}
			if sink, err = export.NewJetStreamSink(context.Background(), nc, export.JetStreamOptions{}); err != nil {
				b.Fatal(err)
			}
			q, err := export.New(export.Options{Name: "webindex", Sink: sink, Logger: indextest.Quiet})
			if err != nil {
				b.Fatal(err)
			}
			e, closeEnv := newBenchEnvWith(b, 5*time.Millisecond, &webindex.Options{Export: q})
			return e, func() {
				if s, err := q.Status(context.Background(), e.db); err == nil {
					b.Logf("export: %d entries left in the queue", s.Entries)
				}
				if js, err := jetstream.New(nc); err == nil {
					if st, err := js.Stream(context.Background(), sink.Stream()); err == nil {
						b.ReportMetric(float64(st.CachedInfo().State.Msgs), "exported-entries")
					}
				}
				closeEnv()
				nc.Close()
				srv.Shutdown()
			}
		})
	})
	b.Run("postgres", func(b *testing.B) {
		srv := pgtest.Start(b)
		benchIndexCorpus(b, func() (*benchEnv, func()) {
			table := fmt.Sprintf("bench_%d", time.Now().UnixNano())
			sink, err := export.NewPostgresSink(context.Background(), srv.DSN(), export.PostgresOptions{Table: table, Values: export.JSONB, Logger: indextest.Quiet})
			if err != nil {
				b.Fatal(err)
			}
			q, err := export.New(export.Options{Name: "webindex", Sink: sink, Logger: indextest.Quiet})
			if err != nil {
				b.Fatal(err)
			}
			e, closeEnv := newBenchEnvWith(b, 5*time.Millisecond, &webindex.Options{Export: q})
			return e, func() {
				if s, err := q.Status(context.Background(), e.db); err == nil {
					b.Logf("export: %d entries left in the queue", s.Entries)
				}
				rows := 0
				if err := sink.Rows(context.Background(), func(export.Entry) error { rows++; return nil }); err == nil {
					b.ReportMetric(float64(rows), "exported-rows")
				}
				closeEnv()
				sink.Close()
			}
		})
	})
}
