package oracle

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkOracle measures timestamps per second with many concurrent
// callers; ns/op is per timestamp, and ts/s is reported explicitly.
func BenchmarkOracle(b *testing.B) {
	ctx := context.Background()
	reportRate := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ts/s")
	}
	serve := func(b *testing.B, s *Server) {
		b.SetParallelism(64)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.Reserve(ctx, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b)
	}
	b.Run("server", func(b *testing.B) {
		serve(b, newTestServer(b, NewMemPersister(0), nil))
	})
	b.Run("server-file", func(b *testing.B) {
		serve(b, newTestServer(b, NewFilePersister(filepath.Join(b.TempDir(), "tso")), nil))
	})
	b.Run("client", func(b *testing.B) {
		c, err := NewClient(newTestServer(b, NewMemPersister(0), nil), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.SetParallelism(64)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Timestamp(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		reportRate(b)
		st := c.Stats()
		b.ReportMetric(float64(st.Timestamps)/float64(max(st.Batches, 1)), "ts/batch")
	})
}
