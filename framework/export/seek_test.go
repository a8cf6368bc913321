package export_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

// scanCounter is a store that counts, per scan of the queue's entries,
// the cells the store read for it: live entries, and the versions of the
// deleted ones garbage collection has not removed.
type scanCounter struct {
	store.Store
	mu    sync.Mutex
	scans []int
}

func (s *scanCounter) Scan(ctx context.Context, req store.ScanRequest) iter.Seq2[store.Cell, error] {
	inner := s.Store.Scan(ctx, req)
	if req.Table != "export" || !slices.Equal(req.Filter.Families, []string{"e"}) {
		return inner
	}
	s.mu.Lock()
	i := len(s.scans)
	s.scans = append(s.scans, 0)
	s.mu.Unlock()
	return func(yield func(store.Cell, error) bool) {
		for c, err := range inner {
			s.mu.Lock()
			s.scans[i]++
			s.mu.Unlock()
			if !yield(c, err) {
				return
			}
		}
	}
}

// A drain that continues a bucket's backlog seeks past the entries the
// drain before it exported: it reads only the entries it exports (and
// the one after), not the deleted ones before them, so a backlog of N
// entries costs one pass through the bucket, plus one from the start for
// entries added meanwhile, instead of N/BatchSize passes growing longer.
func TestADrainSeeksPastWhatItExported(t *testing.T) {
	if frameworktest.OnTiKV() {
		t.Skip("counts the scans of the pebble store")
	}
	st, err := store.Open("", framework.StoreOptions(&store.Options{FS: vfs.NewMem(), Durability: store.DurabilityNone}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	counter := &scanCounter{Store: st}
	rec := newRecorder(t)
	opts := export.Options{Buckets: 1, BatchSize: 10, Name: "q", Sink: rec}
	q, err := export.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	reg := framework.NewRegistry()
	if err := q.Register(reg); err != nil {
		t.Fatal(err)
	}
	filler, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{Store: counter})
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()
	filler.StopObservers() // the whole backlog is queued before the first drain
	if err := filler.DB().Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		for i := range 50 {
			if err := q.Add(tx, fmt.Appendf(nil, "k%03d", i), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	env, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{Store: counter, Oracle: filler.Oracle().(*oracle.Server)})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	wait(t, env)
	if len(rec.table.Keys()) != 50 || len(rec.batches) != 5 {
		t.Fatalf("%d keys in %d batches, want 50 in 5", len(rec.table.Keys()), len(rec.batches))
	}
	counter.mu.Lock()
	scans := slices.Clone(counter.scans)
	counter.mu.Unlock()
	t.Logf("cells read by each drain's scan: %v", scans)
	if len(scans) < 6 {
		t.Fatalf("%d scans of the bucket, want the 5 batches' and one from the start", len(scans))
	}
	// The first drain reads its 10 entries and the next; each later one
	// as much, not the entries deleted before it as well.
	for i := 1; i < 5; i++ {
		if scans[i] > scans[0] {
			t.Errorf("drain %d read %d cells, the first %d: it stepped over the entries exported before it", i+1, scans[i], scans[0])
		}
	}
}
