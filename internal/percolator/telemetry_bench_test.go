package percolator

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/telemetry"
)

// BenchmarkTxnWriteTracing measures what tracing costs a one-cell write
// transaction to an observed column (so that it also writes a
// notification), on an in-memory store so that the CPU cost is not hidden
// behind fsync:
//
//	noop            the default: global provider, nothing installed
//	sdk-unsampled   an SDK provider whose sampler drops every trace
//	sdk-sampled     an SDK provider recording every span (to a discarding
//	                exporter): the cost of actually tracing
//	recent          what a runner installs by default for its traces page:
//	                telemetry.Recent recording a tenth of the traces
func BenchmarkTxnWriteTracing(b *testing.B) {
	exporter := tracetest.NewNoopExporter()
	for _, c := range []struct {
		name string
		tp   func() *sdktrace.TracerProvider
	}{
		{"noop", nil},
		{"sdk-unsampled", func() *sdktrace.TracerProvider {
			return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
		}},
		{"sdk-sampled", func() *sdktrace.TracerProvider {
			return sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
		}},
		{"recent", func() *sdktrace.TracerProvider {
			r, err := telemetry.NewRecent(nil)
			if err != nil {
				b.Fatal(err)
			}
			return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r.Sample()))))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			benchTxnWrite(b, func(o *Options) {
				if c.tp != nil {
					tp := c.tp()
					b.Cleanup(func() { tp.Shutdown(context.Background()) })
					o.TracerProvider = tp
				}
			})
		})
	}
}

func benchTxnWrite(b *testing.B, tweak func(*Options)) {
	st, err := store.Open("", protocol.StoreOptions(&store.Options{FS: vfs.NewMem(), Logger: quietLogger()}))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	e := newEnvOn(b, st)
	e.or = e.srv
	col := Column{Family: "c", Qualifier: "v"}
	db := e.db(b, "bench", func(o *Options) {
		o.Observed = observing(Strong, "t", col)
		tweak(o)
	})
	ctx := context.Background()
	value := []byte("0123456789abcdef0123456789abcdef")
	rows := make([][]byte, 1024)
	for i := range rows {
		rows[i] = []byte(fmt.Sprintf("row%06d", i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if err := db.Update(ctx, func(ctx context.Context, tx *Txn) error {
			return tx.Set("t", rows[i%len(rows)], col, value)
		}); err != nil {
			b.Fatal(err)
		}
	}
}
