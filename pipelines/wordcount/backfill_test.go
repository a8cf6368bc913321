package wordcount_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/pipelines/wordcount"
	"github.com/trickle-dev/trickle/store"
)

// corpus writes n random documents with db and returns them.
func corpus(t *testing.T, db *framework.DB, n int, seed uint64) map[string]string {
	t.Helper()
	vocab := strings.Fields("the a of to and in is it that for on was with as be at by this had not are but from or have")
	rng := rand.New(rand.NewPCG(seed, 2))
	docs := map[string]string{}
	for i := range n {
		var b strings.Builder
		for range 1 + rng.IntN(10) {
			b.WriteString(vocab[rng.IntN(len(vocab))] + " ")
		}
		id := fmt.Sprintf("doc%03d", i)
		if err := wordcount.Put(context.Background(), db, id, b.String()); err != nil {
			t.Fatal(err)
		}
		docs[id] = b.String()
	}
	return docs
}

func countFromScratch(docs map[string]string) map[string]int {
	want := map[string]int{}
	for _, text := range docs {
		for _, w := range wordcount.Words(text) {
			want[w]++
		}
	}
	return want
}

// deployment is a store and an oracle that outlive the in-process
// deployments started on them, as a data directory outlives its runners.
type deployment struct {
	st store.Store
	or *oracle.Server
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	st, err := store.Open("", framework.StoreOptions(&store.Options{FS: vfs.NewMem(), Durability: store.DurabilityNone}))
	if err != nil {
		t.Fatal(err)
	}
	or, err := oracle.NewServer(oracle.NewMemPersister(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { or.Close(); st.Close() })
	return &deployment{st: st, or: or}
}

// start runs reg's observers on the deployment until the test ends.
func (d *deployment) start(t *testing.T, reg *framework.Registry) *frameworktest.Env {
	t.Helper()
	env, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{Store: d.st, Oracle: d.or})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

func waitIdle(t *testing.T, env *frameworktest.Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := env.WaitForObservers(ctx); err != nil {
		t.Fatal(err)
	}
}

func checkCounts(t *testing.T, db *framework.DB, docs map[string]string) {
	t.Helper()
	got, err := wordcount.Counts(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if want := countFromScratch(docs); !maps.Equal(got, want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}

// Documents loaded while nothing counted them are counted once the word
// count is added and backfilled, while writers keep changing documents:
// the counts end as if the observer had been there from the start.
func TestBackfillANewObserver(t *testing.T) {
	d := newDeployment(t)
	before := d.start(t, framework.NewRegistry()) // no observer: nothing counts
	docs := corpus(t, before.DB(), 300, 1)
	before.StopObservers()

	reg := framework.NewRegistry()
	if err := wordcount.Register(reg); err != nil {
		t.Fatal(err)
	}
	env := d.start(t, reg)
	ctx := context.Background()
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() { // live writes during the backfill
		for i := range 60 {
			id, text := fmt.Sprintf("doc%03d", (i*37)%330), fmt.Sprintf("live %d of the", i)
			if i%5 == 4 {
				text = ""
			}
			if err := wordcount.Put(ctx, env.DB(), id, text); err != nil {
				t.Error(err)
			}
			mu.Lock()
			if text == "" {
				delete(docs, id)
			} else {
				docs[id] = text
			}
			mu.Unlock()
		}
	})
	var calls int
	p, err := admin.Backfill(ctx, env.DB(), "wordcount", &admin.BackfillOptions{BatchRows: 40, Progress: func(admin.BackfillProgress) { calls++ }})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !p.Done || p.Rows < 290 || calls < 8 || p.Table != wordcount.DocsTable {
		t.Fatalf("progress %+v after %d batches; want it done over about 300 rows in batches of 40", p, calls)
	}
	waitIdle(t, env)
	checkCounts(t, env.DB(), docs)
}

// Backfilling an observer that has already run for every cell runs it for
// none: each notification finds the cell unchanged since the observer's
// ack.
func TestBackfillCollapsesOnTheAck(t *testing.T) {
	d := newDeployment(t)
	reg := framework.NewRegistry()
	if err := wordcount.Register(reg); err != nil {
		t.Fatal(err)
	}
	env := d.start(t, reg)
	docs := corpus(t, env.DB(), 50, 2)
	waitIdle(t, env)
	ran, skipped := env.Stats().Runs, env.Stats().Skipped
	p, err := admin.Backfill(context.Background(), env.DB(), "wordcount", nil)
	if err != nil || p.Cells != 50 {
		t.Fatalf("backfill: %+v, %v; want 50 cells notified", p, err)
	}
	waitIdle(t, env)
	if s := env.Stats(); s.Runs != ran || s.Skipped-skipped != 50 {
		t.Fatalf("%d runs and %d skips after the backfill; want none and 50", s.Runs-ran, s.Skipped-skipped)
	}
	checkCounts(t, env.DB(), docs)
}

// failingStore fails its ApplyAll calls once armed, after letting ok more
// through: a backfill's process dying (or its store going away) half way.
type failingStore struct {
	store.Store
	armed atomic.Bool
	ok    atomic.Int64
}

func (s *failingStore) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	if s.armed.Load() && s.ok.Add(-1) < 0 {
		return nil, errors.New("injected: store unreachable")
	}
	return s.Store.ApplyAll(ctx, txns)
}

// A backfill cut short resumes after its last recorded batch: run again,
// it notifies the rest, its count covers every row once, and the counts
// are exact.
func TestBackfillResumesAfterACrash(t *testing.T) {
	d := newDeployment(t)
	before := d.start(t, framework.NewRegistry())
	docs := corpus(t, before.DB(), 200, 3)
	before.StopObservers()
	reg := framework.NewRegistry()
	if err := wordcount.Register(reg); err != nil {
		t.Fatal(err)
	}
	env := d.start(t, reg)
	ctx := context.Background()
	flaky := &failingStore{Store: d.st}
	db, err := framework.Open(ctx, flaky, d.or, nil)
	if err != nil {
		t.Fatal(err)
	}
	flaky.ok.Store(2)
	flaky.armed.Store(true)
	p, err := admin.Backfill(ctx, db, "wordcount", &admin.BackfillOptions{BatchRows: 30})
	if err == nil || p.Done || p.Rows != 60 || !strings.Contains(err.Error(), "resume") {
		t.Fatalf("first run: %+v, %v; want it stopped after two batches of 30, saying how to resume", p, err)
	}
	flaky.armed.Store(false)
	p, err = admin.Backfill(ctx, db, "wordcount", &admin.BackfillOptions{BatchRows: 30})
	if err != nil || !p.Done || !p.Resumed || p.Rows != 200 || p.Cells != 200 {
		t.Fatalf("second run: %+v, %v; want it resumed and done with 200 rows", p, err)
	}
	waitIdle(t, env)
	checkCounts(t, env.DB(), docs)

	if _, err := admin.Backfill(ctx, db, "no-such-observer", nil); !errors.Is(err, admin.ErrUnknownObserver) || !strings.Contains(err.Error(), "wordcount") {
		t.Fatalf("unknown observer: %v, want ErrUnknownObserver listing the published ones", err)
	}
}
