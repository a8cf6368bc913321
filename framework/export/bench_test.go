package export_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/oracle"
)

// benchNATS starts an embedded NATS with JetStream on a file store (as a
// runner's) and returns a connection to it.
func benchNATS(b *testing.B) *nats.Conn {
	e, err := cluster.StartEmbedded(cluster.EmbeddedOptions{Port: -1, InsecureNoAuth: true, DataDir: b.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Shutdown)
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc
}

// benchEntries is how many entries each benchmark exports.
const benchEntries = 20_000

// BenchmarkJetStreamSink publishes batches of 1000 entries of 100 bytes
// straight to a JetStream stream on a file store: the sink's own rate.
func BenchmarkJetStreamSink(b *testing.B) {
	nc := benchNATS(b)
	sink, err := export.NewJetStreamSink(context.Background(), nc, export.JetStreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 100)
	seq := uint64(0)
	for b.Loop() {
		began := time.Now()
		for i := 0; i < benchEntries; i += 1000 {
			batch := make([]export.Entry, 1000)
			for j := range batch {
				seq++
				batch[j] = export.Entry{Key: fmt.Appendf(nil, "https://example.org/page/%d", (i+j)%5000), Seq: seq, Value: value}
			}
			if err := sink.Export(context.Background(), "bench", batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(benchEntries/time.Since(began).Seconds(), "entries/s")
	}
}

// BenchmarkQueueToJetStream queues entries of 100 bytes for 5000 keys in
// transactions of 100 entries, with the queue's observer stopped, then
// times the observer draining them all into JetStream: entries/s from
// the store to the stream, the transactions that delete them included.
func BenchmarkQueueToJetStream(b *testing.B) {
	nc := benchNATS(b)
	sink, err := export.NewJetStreamSink(context.Background(), nc, export.JetStreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	or, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer or.Close()
	value := make([]byte, 100)
	for b.Loop() {
		b.StopTimer()
		q, err := export.New(export.Options{Name: "bench", Sink: sink, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		reg := framework.NewRegistry()
		if err := q.Register(reg); err != nil {
			b.Fatal(err)
		}
		filler, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{Oracle: or, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		filler.StopObservers()
		for i := 0; i < benchEntries; i += 100 {
			if err := filler.DB().Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
				for j := range 100 {
					if err := q.Add(tx, fmt.Appendf(nil, "https://example.org/page/%d", (i+j)%5000), value); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		began := time.Now()
		env, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{Store: filler.Store(), Oracle: or, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		if err := env.WaitForObservers(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		took := time.Since(began)
		b.StopTimer()
		b.ReportMetric(benchEntries/took.Seconds(), "entries/s")
		env.Close()
		filler.Close()
		b.StartTimer()
	}
}
