package remote

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// TestConcurrentReadModifyWrite: goroutines on two client connections
// increment shared counters by read-modify-write guarded by a check that
// nobody wrote since the read. Row transactions are atomic across clients,
// so no increment is lost and none is applied twice.
func TestConcurrentReadModifyWrite(t *testing.T) {
	env := newStoreEnv(t, nil, nil)
	second, err := NewStore(connect(t, env.ns), nil)
	if err != nil {
		t.Fatal(err)
	}
	clients := []*StoreClient{env.client, second}
	const workers, incs, counters = 16, 40, 3
	c := col("f", "n\x00")
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			cl := clients[w%2]
			row := []byte{0xff, byte(w % counters), 0}
			for range incs {
				for attempt := 0; ; attempt++ {
					if attempt > 10000 {
						errs <- fmt.Errorf("worker %d: livelock", w)
						return
					}
					cells, err := cl.ReadRow(bg, "ctr", row, []store.Column{c}, []store.Span{{MaxTs: ^uint64(0), Limit: 1}})
					if err != nil {
						errs <- err
						return
					}
					var ts, n uint64
					if len(cells) == 1 {
						ts, n = cells[0].Ts, binary.BigEndian.Uint64(cells[0].Value)
					}
					res, err := cl.Apply(bg, &store.RowTxn{Table: "ctr", Row: row,
						Checks:    []store.Check{{Column: c, MinTs: ts + 1, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
						Mutations: []store.Mutation{{Column: c, Ts: ts + 1, Value: binary.BigEndian.AppendUint64(nil, n+1)}},
					})
					if err != nil {
						errs <- err
						return
					}
					if res.Applied {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := uint64(0)
	for k := range counters {
		cells, err := env.db.ReadRow(bg, "ctr", []byte{0xff, byte(k), 0}, []store.Column{c}, []store.Span{{MaxTs: ^uint64(0), Limit: 1}})
		if err != nil || len(cells) != 1 {
			t.Fatalf("counter %d: %v %v", k, cells, err)
		}
		n := binary.BigEndian.Uint64(cells[0].Value)
		if n != cells[0].Ts {
			t.Errorf("counter %d: value %d at version %d: an increment was lost or doubled", k, n, cells[0].Ts)
		}
		total += n
	}
	if total != workers*incs {
		t.Errorf("counters sum to %d, want %d", total, workers*incs)
	}
}
