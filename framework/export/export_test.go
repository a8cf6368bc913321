package export_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/oracle"
)

// recorder is a sink that keeps every batch it was handed and the table
// the entries make, and checks the order promise as they come: a key's
// entries arrive in sequence order, apart from re-deliveries of entries
// it has seen.
type recorder struct {
	t     *testing.T
	table *export.Table
	mu    sync.Mutex
	// last is, per key, the highest sequence number received; seen every
	// (key, seq) received.
	last        map[string]uint64
	seen        map[string]bool
	batches     [][]export.Entry
	redelivered int
	// fail, while it returns an error, fails the batch before recording it.
	fail func(batch []export.Entry) error
	// unordered: the writers of a key do not conflict, so its entries
	// may come in any order (see the package documentation).
	unordered bool
}

func newRecorder(t *testing.T) *recorder {
	return &recorder{t: t, table: export.NewTable(), last: map[string]uint64{}, seen: map[string]bool{}}
}

func (r *recorder) Export(ctx context.Context, queue string, batch []export.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(batch); err != nil {
			return err
		}
	}
	r.batches = append(r.batches, batch)
	for i, e := range batch {
		id := fmt.Sprintf("%s@%d", e.Key, e.Seq)
		if r.seen[id] {
			r.redelivered++
		} else if e.Seq < r.last[string(e.Key)] && !r.unordered {
			r.t.Errorf("key %q: entry %d after %d", e.Key, e.Seq, r.last[string(e.Key)])
		}
		if i > 0 && string(batch[i-1].Key) > string(e.Key) {
			r.t.Errorf("batch out of key order: %q after %q", e.Key, batch[i-1].Key)
		}
		r.seen[id] = true
		r.last[string(e.Key)] = max(r.last[string(e.Key)], e.Seq)
	}
	return r.table.Export(ctx, queue, batch)
}

var (
	docs  = "docs"
	value = framework.Column{Family: "d", Qualifier: "v"}
)

// start runs a queue with opts (Name "q" unless set) draining to sink, on
// the store and oracle of like if it is set.
func start(t *testing.T, opts export.Options, sink export.Sink, like *frameworktest.Env) (*export.Queue, *frameworktest.Env) {
	t.Helper()
	if opts.Name == "" {
		opts.Name = "q"
	}
	opts.Sink = sink
	q, err := export.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	reg := framework.NewRegistry()
	if err := q.Register(reg); err != nil {
		t.Fatal(err)
	}
	fo := &frameworktest.Options{}
	if like != nil {
		fo.Store, fo.Oracle = like.Store(), like.Oracle().(*oracle.Server)
	}
	env, err := frameworktest.Start(context.Background(), reg, fo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	return q, env
}

// put sets a document's value and exports it, in one transaction; an
// empty value deletes both. Writing the document makes two puts of one key
// conflict, as the package documentation asks of its users.
func put(ctx context.Context, db *framework.DB, q *export.Queue, key, v string) error {
	return db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		if v == "" {
			if err := tx.Delete(docs, []byte(key), value); err != nil {
				return err
			}
			return q.Delete(tx, []byte(key))
		}
		if err := tx.Set(docs, []byte(key), value, []byte(v)); err != nil {
			return err
		}
		return q.Add(tx, []byte(key), []byte(v))
	})
}

func wait(t *testing.T, env *frameworktest.Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := env.WaitForObservers(ctx); err != nil {
		t.Fatal(err)
	}
}

// equalTo fails unless the sink's table holds exactly want.
func equalTo(t *testing.T, tab *export.Table, want map[string]string) {
	t.Helper()
	got := tab.Values()
	for k, v := range want {
		if string(got[k]) != v {
			t.Errorf("key %s: exported %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("key %s: exported %q, want it deleted", k, v)
		}
	}
}

// Concurrent writers update, delete and re-create keys; the sink sees
// each key's entries in sequence order and ends with the final state,
// and nothing is left in the queue.
func TestSinkGetsEveryKeysLatestInOrder(t *testing.T) {
	rec := newRecorder(t)
	q, env := start(t, export.Options{Buckets: 4, BatchSize: 7}, rec, nil)
	ctx := context.Background()
	var mu sync.Mutex
	want := map[string]string{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 60 {
				key := fmt.Sprintf("k%02d", (g*7+i)%20)
				v := fmt.Sprintf("g%d-%d", g, i)
				if i%9 == 8 {
					v = ""
				}
				mu.Lock() // one writer per key at a time: the final state is known
				err := put(ctx, env.DB(), q, key, v)
				if v == "" {
					delete(want, key)
				} else {
					want[key] = v
				}
				mu.Unlock()
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	wait(t, env)
	equalTo(t, rec.table, want)
	s, err := q.Status(ctx, env.DB())
	if err != nil || s.Entries != 0 {
		t.Fatalf("status %+v, %v: want an empty queue", s, err)
	}
	for _, b := range rec.batches {
		if len(b) > 7 {
			t.Fatalf("a batch of %d entries, BatchSize 7", len(b))
		}
	}
}

// Adding entries for one hot key from many transactions at once never
// conflicts: every entry is a cell of its own.
func TestHotKeyAddsNeverConflict(t *testing.T) {
	rec := newRecorder(t)
	rec.unordered = true
	q, env := start(t, export.Options{}, rec, nil)
	var attempts atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 25 {
				err := env.DB().Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
					attempts.Add(1)
					return q.Add(tx, []byte("hot"), fmt.Appendf(nil, "%d-%d", g, i))
				})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := attempts.Load(); n != 8*25 {
		t.Errorf("%d attempts for %d additions: %d conflicted", n, 8*25, n-8*25)
	}
	wait(t, env)
	if len(rec.seen) != 8*25 {
		t.Fatalf("the sink got %d distinct entries, want %d", len(rec.seen), 8*25)
	}
}

// A drain takes BatchSize entries and leaves the rest to the next one,
// which starts where it stopped; no resume marker is left at the end.
func TestBatchesContinueWhereTheyStopped(t *testing.T) {
	rec := newRecorder(t)
	q, env := start(t, export.Options{Buckets: 1, BatchSize: 3}, rec, nil)
	env.StopObservers() // queue everything before the first drain
	db := env.DB()
	if err := db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		for i := range 10 {
			if err := q.Add(tx, fmt.Appendf(nil, "k%d", i), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, env2 := start(t, export.Options{Buckets: 1, BatchSize: 3}, rec, env)
	wait(t, env2)
	var sizes []int
	for _, b := range rec.batches {
		sizes = append(sizes, len(b))
	}
	if fmt.Sprint(sizes) != "[3 3 3 1]" || len(rec.table.Keys()) != 10 {
		t.Fatalf("batches of %v entries, %d keys exported; want [3 3 3 1] and 10", sizes, len(rec.table.Keys()))
	}
	left := 0
	if err := db.View(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		for _, err := range tx.Scan(ctx, framework.ScanOptions{Table: "export"}) {
			if err != nil {
				return err
			}
			left++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d cells left in the queue's table (entries or a resume marker)", left)
	}
}

// A failing sink keeps every entry in the queue: the failure is listed,
// with the sink's error, while it lasts, and once the sink recovers every
// entry reaches it.
func TestFailingSinkLosesNothing(t *testing.T) {
	rec := newRecorder(t)
	var down atomic.Bool
	down.Store(true)
	rec.fail = func([]export.Entry) error {
		if down.Load() {
			return errors.New("search cluster unreachable")
		}
		return nil
	}
	q, env := start(t, export.Options{Buckets: 2}, rec, nil)
	ctx := context.Background()
	want := map[string]string{}
	for i := range 20 {
		k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)
		if err := put(ctx, env.DB(), q, k, v); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		fs, err := admin.Failures(ctx, env.Store())
		if err != nil {
			t.Fatal(err)
		}
		if len(fs) > 0 {
			if fs[0].Observer != q.Observer() || !strings.Contains(fs[0].LastError, "search cluster unreachable") {
				t.Fatalf("failure %+v: want the queue's observer and the sink's error", fs[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no failure listed for the failing sink")
		}
		time.Sleep(5 * time.Millisecond) // polling for the failure record
	}
	if s, err := q.Status(ctx, env.DB()); err != nil || s.Entries != 20 {
		t.Fatalf("while the sink fails: %+v, %v; want all 20 entries waiting", s, err)
	}
	down.Store(false)
	wait(t, env)
	equalTo(t, rec.table, want)
}

// A process that dies after its sink took a batch but before the batch's
// deletion committed leaves the batch in the queue; the next process
// exports it again, and the sink's table, keeping the highest sequence
// number per key, ends exact.
func TestCrashAfterTheSinkTookABatch(t *testing.T) {
	rec := newRecorder(t)
	took := make(chan struct{})
	var once sync.Once
	rec.fail = func(batch []export.Entry) error {
		once.Do(func() { close(took) })
		return nil
	}
	// The first process's sink records the batch, then hangs until the
	// process stops: its transaction never commits.
	hang := export.SinkFunc(func(ctx context.Context, queue string, batch []export.Entry) error {
		rec.Export(ctx, queue, batch)
		<-ctx.Done()
		return ctx.Err()
	})
	q, env := start(t, export.Options{Buckets: 1}, hang, nil)
	ctx := context.Background()
	want := map[string]string{}
	for i := range 10 {
		k, v := fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)
		if err := put(ctx, env.DB(), q, k, v); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	<-took
	env.StopObservers() // the process dies: the drain's transaction is abandoned
	if s, err := q.Status(ctx, env.DB()); err != nil || s.Entries == 0 {
		t.Fatalf("after the crash: %+v, %v; want the exported batch still queued", s, err)
	}
	if err := put(ctx, env.DB(), q, "k3", "v3 again"); err != nil {
		t.Fatal(err)
	}
	want["k3"] = "v3 again"
	_, env2 := start(t, export.Options{Buckets: 1}, rec, env)
	wait(t, env2)
	equalTo(t, rec.table, want)
	if rec.redelivered == 0 {
		t.Fatal("nothing was exported twice: the crash did not happen where the test meant it")
	}
}

// Tombstones carry no value; keys are checked.
func TestDeletesAreTombstonesAndKeysAreChecked(t *testing.T) {
	rec := newRecorder(t)
	q, env := start(t, export.Options{}, rec, nil)
	ctx := context.Background()
	if err := put(ctx, env.DB(), q, "gone", "v"); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, env.DB(), q, "gone", ""); err != nil {
		t.Fatal(err)
	}
	wait(t, env)
	var last export.Entry
	for _, b := range rec.batches {
		for _, e := range b {
			last = e
		}
	}
	if !last.Delete || last.Value != nil || string(last.Key) != "gone" {
		t.Fatalf("last entry %+v, want a tombstone for gone", last)
	}
	for _, key := range [][]byte{nil, make([]byte, export.MaxKeyBytes+1)} {
		err := env.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error { return q.Add(tx, key, nil) })
		if !errors.Is(err, export.ErrInvalidEntry) {
			t.Errorf("key of %d bytes: %v, want ErrInvalidEntry", len(key), err)
		}
	}
}

// Options are checked, and each error names the field.
func TestOptionsAreValidated(t *testing.T) {
	for _, tc := range []struct {
		opts export.Options
		says string
	}{
		{export.Options{}, "Name"},
		{export.Options{Name: "a.b"}, "Name"},
		{export.Options{Name: "q", Buckets: export.MaxBuckets + 1}, "Buckets"},
		{export.Options{Name: "q", BatchSize: -1}, "BatchSize"},
		{export.Options{Name: "q", BatchBytes: -1}, "BatchBytes"},
		{export.Options{Name: "q", Table: "__meta"}, "Table"},
	} {
		_, err := export.New(tc.opts)
		if !errors.Is(err, export.ErrInvalidOptions) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v, want ErrInvalidOptions naming %s", tc.opts, err, tc.says)
		}
	}
	q, err := export.New(export.Options{Name: "nosink"})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Register(framework.NewRegistry()); !errors.Is(err, export.ErrInvalidOptions) {
		t.Errorf("Register without a sink: %v", err)
	}
}

// A key early in its bucket that is updated while the bucket drains does
// not hold the keys after it back: the next drain starts where the last
// one stopped, and wraps around to the start after the bucket's end.
func TestAKeyUpdatedMeanwhileDoesNotHoldBackTheOthers(t *testing.T) {
	rec := newRecorder(t)
	opts := export.Options{Buckets: 1, BatchSize: 2}
	q, env := start(t, opts, rec, nil)
	env.StopObservers()
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d"} {
		if err := put(ctx, env.DB(), q, k, k+"1"); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	rec.fail = func([]export.Entry) error {
		// The first batch (a, b) is being exported: a changes again.
		once.Do(func() {
			if err := put(ctx, env.DB(), q, "a", "a2"); err != nil {
				t.Error(err)
			}
		})
		return nil
	}
	_, env2 := start(t, opts, rec, env)
	wait(t, env2)
	var got []string
	for _, b := range rec.batches {
		var keys []string
		for _, e := range b {
			keys = append(keys, string(e.Key))
		}
		got = append(got, strings.Join(keys, ","))
	}
	if strings.Join(got, " ") != "a,b c,d a" {
		t.Fatalf("batches %q, want [a,b c,d a]", got)
	}
	equalTo(t, rec.table, map[string]string{"a": "a2", "b": "b1", "c": "c1", "d": "d1"})
}

// Keys are bytes: zero bytes, 0xff and keys that are prefixes of others
// keep their entries apart and in order.
func TestBinaryKeys(t *testing.T) {
	rec := newRecorder(t)
	q, env := start(t, export.Options{Buckets: 1}, rec, nil)
	ctx := context.Background()
	want := map[string]string{}
	for i, k := range []string{"a", "a\x00", "a\x00b", "\xff", "\x00", "ab", "a"} {
		v := fmt.Sprint(i)
		if err := put(ctx, env.DB(), q, k, v); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	wait(t, env)
	equalTo(t, rec.table, want)
}
