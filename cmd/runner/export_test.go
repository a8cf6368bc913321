package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/runner"
)

// exportState is how far the export has got: entries waiting in the
// queue, messages published to the stream (its last sequence: the
// compacted stream holds fewer).
func exportState(t *testing.T, ctx context.Context, node *runner.Node, db *framework.DB) (queued int, streamed uint64) {
	t.Helper()
	q, err := export.New(export.Options{Name: exportQueue})
	if err != nil {
		t.Fatal(err)
	}
	s, err := q.Status(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(node.Conn())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := js.Stream(ctx, "TRICKLE_EXPORT"); err == nil {
		streamed = st.CachedInfo().State.LastSeq
	}
	return s.Entries, streamed
}

// killMidExport loads changes from the background and kills the runner
// with SIGKILL once the export is under way, as progress tells it: some
// entries exported (more than before the load), others still queued.
func killMidExport(t *testing.T, ctx context.Context, p *proc, db *framework.DB, changes []sample.Change, progress func() (queued int, exported uint64)) {
	t.Helper()
	_, before := progress()
	loadCtx, stopLoading := context.WithCancel(ctx)
	defer stopLoading()
	loaded := make(chan error, 1)
	go func() { loaded <- loadChanges(loadCtx, db, changes) }()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		queued, exported := progress()
		if queued > 0 && exported > before {
			t.Logf("killing %s with %d entries queued, %d exported", p.name, queued, exported)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the export never got under way: %d queued, %d exported", queued, exported)
		}
		time.Sleep(5 * time.Millisecond) // polling for the export to start
	}
	p.kill()
	stopLoading() // what it did not load, the test loads again
	if err := <-loaded; err != nil {
		t.Logf("the load ended with the runner: %v", err)
	}
}

// exportThroughKills runs the web index with exportArgs on a fresh
// deployment: it loads c's pages, kills the runner with SIGKILL in the
// middle of the export (as progress tells how far it got), restarts it,
// applies c's crawler step seeded stepSeed, kills it again mid-export,
// restarts it and waits until the deployment is idle with nothing left
// queued.
func exportThroughKills(t *testing.T, ctx context.Context, c *sample.Corpus, stepSeed int64, exportArgs []string, progress func(*runner.Node, *framework.DB) func() (int, uint64)) *killedExport {
	t.Helper()
	dir, port := t.TempDir(), freePort(t)
	var first []sample.Change
	for d := range c.All() {
		first = append(first, sample.Change{Op: sample.Add, URL: d.URL, HTML: d.HTML})
	}
	owner := startRunner(t, "owner", dir, port, exportArgs...)
	node, db := client(t, ctx, dir, port)
	killMidExport(t, ctx, owner, db, first, progress(node, db))

	// The loader's pages that did not make it before the kill are loaded
	// again (loading an unchanged page changes nothing).
	owner = startRunner(t, "owner-again", dir, port, exportArgs...)
	node, db = client(t, ctx, dir, port)
	if err := loadChanges(ctx, db, first); err != nil {
		t.Fatal(err)
	}
	step := c.Step(stepSeed, 0.2)
	killMidExport(t, ctx, owner, db, step, progress(node, db))

	startRunner(t, "owner-third", dir, port, exportArgs...)
	node, db = client(t, ctx, dir, port)
	if err := loadChanges(ctx, db, step); err != nil {
		t.Fatal(err)
	}
	if stuck, err := runner.Wait(ctx, node, runner.WaitOptions{Poll: 50 * time.Millisecond}); err != nil || len(stuck) > 0 {
		t.Fatalf("wait: %v, stuck %v", err, stuck)
	}
	if queued, _ := exportState(t, ctx, node, db); queued != 0 {
		t.Fatalf("%d entries still queued once the deployment is idle", queued)
	}
	return &killedExport{node: node, db: db, dir: dir, port: port}
}

// killedExport is the deployment exportThroughKills leaves: the last
// runner's client, its data directory and NATS port.
type killedExport struct {
	node *runner.Node
	db   *framework.DB
	dir  string
	port int
}

// TestExportSurvivesKill9 runs the web index with -export jetstream,
// loads a corpus, kills the runner with SIGKILL in the middle of the
// export, restarts it, applies a crawler's step of updates, deletes and
// new pages, kills it again mid-export, and restarts it: an external
// consumer reading the stream from the start then holds exactly the
// canonical table of a from-scratch computation.
func TestExportSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := sample.New(sample.Options{Pages: 250, Seed: 21, BaseURL: "http://docs.example/"})
	if err != nil {
		t.Fatal(err)
	}
	node := exportThroughKills(t, ctx, c, 22, []string{"-export", "jetstream"}, func(node *runner.Node, db *framework.DB) func() (int, uint64) {
		return func() (int, uint64) { return exportState(t, ctx, node, db) }
	}).node

	got, n, err := webindex.ReadExported(ctx, node.Conn(), export.ConsumeOptions{Queue: exportQueue})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := c.Pages()
	if err != nil {
		t.Fatal(err)
	}
	want := webindex.CanonicalTable(batch.Compute(pages))
	if !maps.Equal(got, want) {
		var diffs []string
		for _, u := range slices.Sorted(maps.Keys(want)) {
			if got[u] != want[u] {
				diffs = append(diffs, fmt.Sprintf("%s: exported %+v, want %+v", u, got[u], want[u]))
			}
		}
		for u := range got {
			if _, ok := want[u]; !ok {
				diffs = append(diffs, u+": exported, but not loaded")
			}
		}
		t.Fatalf("the consumer's table (%d rows from %d messages) differs from a from-scratch computation (%d rows) in %d rows:\n%s",
			len(got), n, len(want), len(diffs), strings.Join(diffs[:min(len(diffs), 20)], "\n"))
	}
	t.Logf("the consumer rebuilt %d rows from %d messages", len(got), n)
}

// Export turned on for a loaded index: `runner backfill webindex-export`
// exports every page, and the consumer's table is the batch computation's.
func TestBackfillCommandExportsALoadedIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, port := t.TempDir(), freePort(t)
	c, err := sample.New(sample.Options{Pages: 200, Seed: 23, BaseURL: "http://docs.example/"})
	if err != nil {
		t.Fatal(err)
	}
	var first []sample.Change
	for d := range c.All() {
		first = append(first, sample.Change{Op: sample.Add, URL: d.URL, HTML: d.HTML})
	}
	owner := startRunner(t, "plain", dir, port)
	node, db := client(t, ctx, dir, port)
	if err := loadChanges(ctx, db, first); err != nil {
		t.Fatal(err)
	}
	if _, err := runner.Wait(ctx, node, runner.WaitOptions{Poll: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	owner.kill()
	startRunner(t, "exporting", dir, port, "-export", "jetstream")
	node, _ = client(t, ctx, dir, port)
	flags := []string{"-data", dir, "-nats-port", fmt.Sprint(port), "-log-level", "warn"}
	if code, _, stderr := runCmd(t, append([]string{"backfill", "no-such-observer"}, flags...)...); code != 1 || !strings.Contains(stderr, "webindex-export") {
		t.Fatalf("backfill of an unknown observer: exit %d, %q; want 1, naming the observers there are", code, stderr)
	}
	code, out, _ := runCmd(t, append([]string{"backfill", webindex.ExportObserver, "-batch-rows", "40"}, flags...)...)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("backfilled %s: %d rows", webindex.ExportObserver, c.Len())) {
		t.Fatalf("backfill: exit %d, %q; want %d rows", code, out, c.Len())
	}
	if stuck, err := runner.Wait(ctx, node, runner.WaitOptions{Poll: 50 * time.Millisecond}); err != nil || len(stuck) > 0 {
		t.Fatalf("wait: %v, stuck %v", err, stuck)
	}
	got, _, err := webindex.ReadExported(ctx, node.Conn(), export.ConsumeOptions{Queue: exportQueue})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := c.Pages()
	if err != nil {
		t.Fatal(err)
	}
	if want := webindex.CanonicalTable(batch.Compute(pages)); !maps.Equal(got, want) {
		t.Fatalf("after the backfill the consumer holds %d rows, want the %d of a from-scratch computation", len(got), len(want))
	}
}

// TestExportKV runs the web index with -export kv: once the deployment
// is idle, a plain KV client reading the bucket holds exactly the
// canonical table of a from-scratch computation, deleted pages gone.
func TestExportKV(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir, port := t.TempDir(), freePort(t)
	c, err := sample.New(sample.Options{Pages: 120, Seed: 24, BaseURL: "http://docs.example/"})
	if err != nil {
		t.Fatal(err)
	}
	var first []sample.Change
	for d := range c.All() {
		first = append(first, sample.Change{Op: sample.Add, URL: d.URL, HTML: d.HTML})
	}
	startRunner(t, "kv", dir, port, "-export", "kv", "-export-bucket", "pages")
	node, db := client(t, ctx, dir, port)
	if err := loadChanges(ctx, db, first); err != nil {
		t.Fatal(err)
	}
	if err := loadChanges(ctx, db, c.Step(25, 0.2)); err != nil {
		t.Fatal(err)
	}
	if stuck, err := runner.Wait(ctx, node, runner.WaitOptions{Poll: 50 * time.Millisecond}); err != nil || len(stuck) > 0 {
		t.Fatalf("wait: %v, stuck %v", err, stuck)
	}
	js, err := jetstream.New(node.Conn())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "pages")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]schema.CanonicalRow{}
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		url, hashed, err := export.DecodeKeyToken(k)
		if err != nil || hashed {
			t.Fatalf("KV key %q: %v (hashed %v)", k, err, hashed)
		}
		row, _, err := schema.DecodeExported(export.Entry{Key: url, Value: e.Value()})
		if err != nil {
			t.Fatal(err)
		}
		got[row.URL] = row
	}
	pages, err := c.Pages()
	if err != nil {
		t.Fatal(err)
	}
	if want := webindex.CanonicalTable(batch.Compute(pages)); !maps.Equal(got, want) {
		t.Fatalf("the bucket holds %d rows, want the %d of a from-scratch computation", len(got), len(want))
	}
}

// closingSink is a sink with connections of its own, as a PostgreSQL
// sink's pool.
type closingSink struct{ closed int }

func (s *closingSink) Export(context.Context, string, []export.Entry) error { return nil }
func (s *closingSink) Close()                                               { s.closed++ }

// TestDeferredSinkCloseClosesConnectedSink checks the rule that stopping
// the pipelines closes a sink that holds connections of its own, and that
// closing with no export or before connect does nothing.
func TestDeferredSinkCloseClosesConnectedSink(t *testing.T) {
	var none *deferredSink
	none.close() // no export: nothing to close, no panic

	d := &deferredSink{}
	d.close() // not connected yet
	s := &closingSink{}
	d.sink.Store(&connectedSink{s})
	d.close()
	if s.closed != 1 {
		t.Fatalf("the connected sink was closed %d times, want 1", s.closed)
	}
}
