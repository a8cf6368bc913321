package webindex_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/store"
)

// consumer is the far end of the index's export: the table the exported
// entries make, last sequence number winning per URL.
type consumer struct {
	t     *testing.T
	table *export.Table
}

func (c *consumer) Export(ctx context.Context, queue string, entries []export.Entry) error {
	for _, e := range entries {
		if _, _, err := schema.DecodeExported(e); err != nil {
			c.t.Error(err)
		}
	}
	return c.table.Export(ctx, queue, entries)
}

// rows decodes the consumer's table.
func (c *consumer) rows() map[string]schema.CanonicalRow {
	out := map[string]schema.CanonicalRow{}
	for k, v := range c.table.Values() {
		r, _, err := schema.DecodeExported(export.Entry{Key: []byte(k), Value: v})
		if err != nil {
			c.t.Fatal(err)
		}
		out[k] = r
	}
	return out
}

// sameTable fails unless the consumer's table is the batch computation's.
func sameTable(t *testing.T, step string, c *consumer, want map[string]schema.CanonicalRow) {
	t.Helper()
	got := c.rows()
	if maps.Equal(got, want) {
		return
	}
	n := 0
	for _, u := range slices.Sorted(maps.Keys(want)) {
		if got[u] != want[u] && n < 10 {
			t.Errorf("%s: %s exported as %+v, want %+v", step, u, got[u], want[u])
			n++
		}
	}
	for u := range got {
		if _, ok := want[u]; !ok && n < 20 {
			t.Errorf("%s: %s exported, but it is not loaded", step, u)
			n++
		}
	}
	t.Fatalf("%s: the exported table (%d rows) differs from a from-scratch computation (%d rows)", step, len(got), len(want))
}

// deployment is a store and an oracle that outlive the in-process
// deployments started on them.
type deployment struct {
	st store.Store
	or *oracle.Server
}

func newDeployment(t *testing.T) *deployment {
	t.Helper()
	st, err := store.Open("", framework.StoreOptions(&store.Options{FS: vfs.NewMem(), Durability: store.DurabilityNone, Logger: indextest.Quiet}))
	if err != nil {
		t.Fatal(err)
	}
	or, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: indextest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { or.Close(); st.Close() })
	return &deployment{st: st, or: or}
}

// start runs the index's observers on the deployment, exporting to a
// fresh consumer when export is set.
func (d *deployment) start(t *testing.T, exporting bool) (*indextest.Env, *consumer) {
	t.Helper()
	if !exporting {
		return d.startExportingTo(t, nil), nil
	}
	c := &consumer{t: t, table: export.NewTable()}
	return d.startExportingTo(t, c), c
}

// startExportingTo runs the index's observers on the deployment,
// exporting to sink (nil: not exporting).
func (d *deployment) startExportingTo(t *testing.T, sink export.Sink) *indextest.Env {
	t.Helper()
	var opts webindex.Options
	if sink != nil {
		q, err := export.New(export.Options{Name: "webindex", Buckets: 4, BatchSize: 50, Sink: sink, Logger: indextest.Quiet})
		if err != nil {
			t.Fatal(err)
		}
		opts.Export = q
	}
	ix, err := webindex.New(&opts)
	if err != nil {
		t.Fatal(err)
	}
	reg := framework.NewRegistry()
	if err := ix.Register(reg); err != nil {
		t.Fatal(err)
	}
	fw, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{Store: d.st, Oracle: d.or, Workers: 16, IdleWait: 2 * time.Millisecond, Logger: indextest.Quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fw.Close() })
	return &indextest.Env{T: t, FW: fw, Store: fw.Store(), DB: fw.DB(), Registry: reg, Index: ix}
}

// changeSome updates, deletes and adds pages of c.
func changeSome(c *indextest.Corpus, n int) map[string]string {
	changes := map[string]string{}
	for range n {
		u := c.URLs[c.Rand.IntN(len(c.URLs))]
		if _, loaded := c.Pages[u]; loaded && c.Rand.IntN(3) == 0 {
			changes[u] = ""
		} else {
			changes[u] = c.HTML(u)
		}
	}
	c.Apply(changes)
	return changes
}

// The exported table follows the index through loads, updates and
// deletes: once the observers are idle it is the canonical table of a
// from-scratch computation, titles cut, duplicates pointing at their
// canonical, deleted pages gone.
func TestExportedTableEqualsBatch(t *testing.T) {
	d := newDeployment(t)
	e, c := d.start(t, true)
	cor := indextest.NewCorpus(11, 140)
	first := map[string]string{}
	for _, u := range cor.URLs[:110] {
		first[u] = cor.HTML(u)
	}
	cor.Apply(first)
	e.Load(first)
	e.Settle()
	sameTable(t, "loaded", c, webindex.CanonicalTable(cor.Expected(t)))
	for round := range 2 {
		e.Load(changeSome(cor, 40))
		e.Settle()
		sameTable(t, fmt.Sprintf("round %d", round), c, webindex.CanonicalTable(cor.Expected(t)))
	}
	if _, stale := c.table.Counts(); stale == 0 {
		t.Log("no entry was stale or re-delivered in this run")
	}
}

// Export turned on for an index already loaded, then backfilled while
// pages keep changing, exports the whole canonical table: as if it had
// been on from the start.
func TestExportBackfilledOnALoadedIndex(t *testing.T) {
	d := newDeployment(t)
	e, _ := d.start(t, false)
	cor := indextest.NewCorpus(12, 140)
	first := map[string]string{}
	for _, u := range cor.URLs[:120] {
		first[u] = cor.HTML(u)
	}
	cor.Apply(first)
	e.Load(first)
	e.Settle()
	e.FW.StopObservers()

	e2, c := d.start(t, true)
	var wg sync.WaitGroup
	changes := changeSome(cor, 30)
	wg.Go(func() { e2.Load(changes) })
	p, err := admin.Backfill(context.Background(), e2.DB, webindex.ExportObserver, &admin.BackfillOptions{BatchRows: 25})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !p.Done || p.Rows < 100 {
		t.Fatalf("backfill: %+v; want it done over the loaded pages' rows", p)
	}
	e2.Settle()
	sameTable(t, "backfilled", c, webindex.CanonicalTable(cor.Expected(t)))
}

// A page whose title changes while its text stays (its cluster is not
// recomputed) is exported with its new title.
func TestExportedTitleFollowsThePage(t *testing.T) {
	d := newDeployment(t)
	e, c := d.start(t, true)
	page := func(title string) *extract.Page {
		return &extract.Page{URL: "http://a.example/", Title: title, Text: "same words"}
	}
	e.Put(page("first title"), &extract.Page{URL: "http://b.example/", Title: "b", Text: "other", Links: []extract.Link{{Target: "http://a.example/"}}})
	e.Settle()
	e.Put(page("second title"))
	e.Settle()
	got := c.rows()["http://a.example/"]
	if want := (schema.CanonicalRow{URL: "http://a.example/", Title: "second title", Canonical: "http://a.example/", InboundCount: 1, Rank: 1}); got != want {
		t.Fatalf("exported %+v, want %+v", got, want)
	}
}

// A bulk load into an index that is exported notifies every imported
// page for export once the import is done.
func TestBulkLoadIsExported(t *testing.T) {
	d := newDeployment(t)
	e, c := d.start(t, true)
	cor := indextest.NewCorpus(13, 100)
	first := map[string]string{}
	for _, u := range cor.URLs {
		first[u] = cor.HTML(u)
	}
	cor.Apply(first)
	pages := map[string]*extract.Page{}
	for u, h := range cor.Pages {
		p, err := extract.Parse(u, strings.NewReader(h), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		pages[p.URL] = p
	}
	st, err := e.Index.BulkLoad(context.Background(), e.DB, pages, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Exported != int64(len(pages)) {
		t.Fatalf("%d pages notified for export, want %d", st.Exported, len(pages))
	}
	e.Settle()
	sameTable(t, "bulk loaded", c, webindex.CanonicalTable(cor.Expected(t)))
}
