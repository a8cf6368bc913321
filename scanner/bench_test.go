package scanner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/scanner"
	"github.com/trickle-dev/trickle/store"
)

// BenchmarkScanPass measures one full pass over 1k dirty rows (rows with a
// pending notification) in tables of 10k and 1M clean rows. Scanning reads
// the notify locality group only, so the cost should not depend on the
// number of clean rows.
func BenchmarkScanPass(b *testing.B) {
	for _, clean := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("clean=%d", clean), func(b *testing.B) {
			st, err := store.Open(b.TempDir(), framework.StoreOptions(&store.Options{Logger: quiet, Durability: store.DurabilityNone}))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			notify := store.Column{Family: protocol.NotifyFamily, Qualifier: "\x03docx"}
			for i := range clean {
				m := []store.Mutation{{Column: content, Ts: 1, Value: []byte("some clean content")}}
				if i%(clean/1000) == 0 {
					m = append(m, store.Mutation{Column: notify, Ts: 2, Value: []byte{}})
				}
				if _, err := st.Apply(ctx, &store.RowTxn{Table: "docs", Row: []byte(fmt.Sprintf("row%08d", i)), Mutations: m, NoSync: true}); err != nil {
					b.Fatal(err)
				}
			}
			// Measure the steady state, after the bulk load has been
			// compacted as a running store would be.
			for _, g := range []string{store.DefaultGroup, protocol.NotifyGroup} {
				if err := st.CompactGroup(ctx, g); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				n, err := admin.Pending(ctx, st, []string{"docs"})
				if err != nil || n != 1000 {
					b.Fatalf("found %d dirty rows (%v), want 1000", n, err)
				}
			}
		})
	}
}

// BenchmarkScanTombstones measures a pass over 1k pending notifications
// after 100k processed (deleted) ones, before and after the notify group is
// compacted: why runners compact it.
func BenchmarkScanTombstones(b *testing.B) {
	for _, compact := range []bool{false, true} {
		b.Run(fmt.Sprintf("compacted=%v", compact), func(b *testing.B) {
			st, err := store.Open(b.TempDir(), framework.StoreOptions(&store.Options{Logger: quiet, Durability: store.DurabilityNone}))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			notify := store.Column{Family: protocol.NotifyFamily, Qualifier: "\x03docx"}
			for i := range 101_000 {
				row := []byte(fmt.Sprintf("row%08d", i))
				if _, err := st.Apply(ctx, &store.RowTxn{Table: "docs", Row: row, Mutations: []store.Mutation{{Column: notify, Ts: 2, Value: []byte{}}}, NoSync: true}); err != nil {
					b.Fatal(err)
				}
				if i%101 != 0 {
					if _, err := st.Apply(ctx, &store.RowTxn{Table: "docs", Row: row, Mutations: []store.Mutation{{Column: notify, Ts: 2, Delete: true}}, NoSync: true}); err != nil {
						b.Fatal(err)
					}
				}
			}
			if compact {
				if err := st.CompactGroup(ctx, protocol.NotifyGroup); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				n, err := admin.Pending(ctx, st, []string{"docs"})
				if err != nil || n != 1000 {
					b.Fatalf("found %d (%v), want 1000", n, err)
				}
			}
		})
	}
}

// BenchmarkNotifications measures notifications processed per second by
// one runner's scanner and worker with a trivial observer, on disk with
// default durability.
func BenchmarkNotifications(b *testing.B) {
	st, err := store.Open(b.TempDir(), framework.StoreOptions(&store.Options{Logger: quiet}))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ts, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	defer ts.Close()
	reg := framework.NewRegistry()
	trivial := func(context.Context, *framework.Txn, []byte, framework.Column) error { return nil }
	if err := reg.Register(framework.Observer{Name: "trivial", Table: "docs", Columns: []framework.Column{content}, Kind: framework.Strong, Fn: trivial}); err != nil {
		b.Fatal(err)
	}
	db, err := framework.Open(context.Background(), st, ts, &framework.Options{Observers: reg, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for lo := 0; lo < b.N; lo += 500 {
		err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			for i := lo; i < min(lo+500, b.N); i++ {
				if err := tx.Set("docs", []byte(fmt.Sprintf("doc%09d", i)), content, []byte("x")); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	sc, err := scanner.New(notify.NewProcessor(db, reg), &scanner.Options{Tables: reg.Tables, Concurrency: 32, IdleWait: time.Millisecond, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- sc.Run(runCtx) }()
	if err := admin.AwaitNoPending(ctx, st, []string{"docs"}, time.Millisecond); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	stop()
	<-done
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "notifications/s")
}
