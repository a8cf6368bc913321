package export_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework/export"
)

// BenchmarkPostgresSink upserts batches of 1000 entries of 100 bytes (keys
// over 5000 URLs, so most batches update rows) into a local server: the
// sink's own rate, one batch at a time.
func BenchmarkPostgresSink(b *testing.B) {
	for _, values := range []export.ValueType{export.Bytea, export.JSONB} {
		b.Run(string(values), func(b *testing.B) {
			dsn := sharedServer(b).DSN()
			sink := newPostgresSink(b, dsn, export.PostgresOptions{Table: "bench_" + string(values), Values: values})
			value := fmt.Appendf(nil, `{"v": %q}`, strings.Repeat("x", 90)) // 100 bytes
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
		})
	}
}
