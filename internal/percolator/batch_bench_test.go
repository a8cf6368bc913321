package percolator

import (
	"context"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/remote/remotetest"
	"github.com/trickle-dev/trickle/store"
)

// BenchmarkWideTxn measures transactions that write one cell in each of
// 100 rows (like a page's postings), with each row's prewrite and commit
// sent to the store on its own (RowsPerApply=1) or in batches of up to 256
// rows, on an in-memory store in process and through the NATS store
// client. ns/op is per transaction.
func BenchmarkWideTxn(b *testing.B) {
	const rows = 100
	for _, where := range []string{"local", "nats"} {
		for _, per := range []int{1, 256} {
			b.Run(fmt.Sprintf("%s/RowsPerApply=%d", where, per), func(b *testing.B) {
				st, err := store.Open("", protocol.StoreOptions(&store.Options{FS: vfs.NewMem(), Logger: quietLogger()}))
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				e := newEnvOn(b, st)
				var use store.Store = st
				if where == "nats" {
					use = natsStore(b, st)
				}
				db, err := New(use, e.or, &Options{WorkerID: "w", Liveness: e.live, Logger: quietLogger(), RowsPerApply: per})
				if err != nil {
					b.Fatal(err)
				}
				value := []byte("posting")
				n := 0
				for b.Loop() {
					n++
					if err := db.Update(bg, func(ctx context.Context, tx *Txn) error {
						for i := range rows {
							if err := tx.Set("t", fmt.Appendf(nil, "term%03d", i), Column{Family: "c", Qualifier: fmt.Sprint(n)}, value); err != nil {
								return err
							}
						}
						return nil
					}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
			})
		}
	}
}

// natsStore serves st over an embedded NATS server and returns a client
// of it.
func natsStore(b *testing.B, st store.Store) store.Store {
	return remotetest.Serve(b, st, nil).Store
}
