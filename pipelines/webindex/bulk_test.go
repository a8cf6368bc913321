package webindex_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/remote/remotetest"
	"github.com/trickle-dev/trickle/store"
)

// parsePages parses a corpus's pages as a bulk load takes them.
func parsePages(t testing.TB, htmls map[string]string) map[string]*extract.Page {
	t.Helper()
	pages := map[string]*extract.Page{}
	for u, h := range htmls {
		p, err := extract.Parse(u, strings.NewReader(h), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		pages[p.URL] = p
	}
	return pages
}

// initialCorpus is the corpus the bulk tests start from: the one
// TestIncrementalEqualsBatch loads first, duplicates linking to each other
// included.
func initialCorpus(c *indextest.Corpus) map[string]string {
	initial := map[string]string{}
	for _, u := range c.URLs[:130] {
		initial[u] = c.HTML(u)
	}
	initial[c.URLs[0]] = `<title>T9</title>twin <a href="` + c.URLs[1] + `">a</a>`
	initial[c.URLs[1]] = `<title>T9</title>twin <a href="` + c.URLs[2] + `">a</a>`
	initial[c.URLs[2]] = `<title>T9</title>twin <a href="` + c.URLs[0] + `">a</a>`
	initial[c.URLs[3]] = `<p>fan</p><a href="` + c.URLs[0] + `">x</a><a href="` + c.URLs[1] + `">y</a><a href="` + c.URLs[2] + `">z</a>`
	return initial
}

// randomChanges updates, deletes, re-adds and loads pages of c.
func randomChanges(c *indextest.Corpus, deleted *[]string) map[string]string {
	changes := map[string]string{}
	for _, u := range c.URLs {
		switch r := c.Rand.IntN(20); {
		case c.Pages[u] == "" && slices.Contains(*deleted, u) && r < 10:
			changes[u] = c.HTML(u)
		case c.Pages[u] == "" && r == 0:
			changes[u] = c.HTML(u)
		case c.Pages[u] != "" && r < 3:
			changes[u] = c.HTML(u)
		case c.Pages[u] != "" && r < 5:
			changes[u] = ""
			*deleted = append(*deleted, u)
		case c.Pages[u] != "" && r == 5:
			changes[u] = c.Pages[u]
		}
	}
	return changes
}

// A bulk-loaded index equals the batch computation, and stays equal to
// it as pages are updated, deleted and re-added incrementally.
func TestBulkLoadThenIncremental(t *testing.T) {
	e := indextest.New(t)
	c := indextest.NewCorpus(1, 160)
	initial := initialCorpus(c)
	st, err := e.Index.BulkLoad(context.Background(), e.DB, parsePages(t, initial), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Pages != len(initial) || st.Fenced != 0 || st.Resumed || st.CommitTs <= st.StartTs {
		t.Fatalf("stats %+v", st)
	}
	c.Apply(initial)
	e.Settle()
	check(e, c, "bulk load")
	if s := e.FW.Stats(); s.Runs != 0 {
		t.Errorf("%d observer runs after a bulk load, want none", s.Runs)
	}
	var deleted []string
	for step := range 3 {
		changes := randomChanges(c, &deleted)
		e.Load(changes)
		c.Apply(changes)
		e.Settle()
		check(e, c, fmt.Sprintf("step %d (%d changes)", step+1, len(changes)))
	}
}

// dumpIndex lists every cell of the index's tables, with the inlink count
// of each row as the observers define it (folded count plus queued
// changes), not as it happens to be split between the two.
func dumpIndex(t *testing.T, db *framework.DB) []string {
	t.Helper()
	var out []string
	err := db.View(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		out = out[:0]
		for _, table := range []string{schema.PagesTable, schema.ClustersTable, schema.TermsTable, schema.TopTable, schema.SitesTable, schema.StatsTable, schema.FenceTable} {
			counts := map[string]int64{}
			anchors := map[string]map[string]int64{}
			rowAnchors := func(row []byte) map[string]int64 {
				m := anchors[string(row)]
				if m == nil {
					m = map[string]int64{}
					anchors[string(row)] = m
				}
				return m
			}
			for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: table}) {
				if err != nil {
					return err
				}
				if e.Column == schema.CorpusCol {
					v, err := webindex.CorpusWithoutTime(e.Value)
					if err != nil {
						return err
					}
					e.Value = v
				}
				switch {
				case strings.HasPrefix(e.Column.Family, "__"): // the framework's acks
				case e.Column.Family == "in.q":
					n, err := schema.DecodeInlinkDelta(e.Value, rowAnchors(e.Row))
					if err != nil {
						return err
					}
					counts[string(e.Row)] += n
				case e.Column == (framework.Column{Family: "page", Qualifier: "inlinks"}):
					n, err := strconv.ParseInt(string(e.Value), 10, 64)
					if err != nil {
						return err
					}
					counts[string(e.Row)] += n
				case e.Column == (framework.Column{Family: "page", Qualifier: "anchor-terms"}):
					if err := webindex.AnchorTerms(e.Value, rowAnchors(e.Row)); err != nil {
						return err
					}
				default:
					out = append(out, fmt.Sprintf("%s %q %s %q", table, e.Row, e.Column, e.Value))
				}
			}
			for _, r := range slices.Sorted(maps.Keys(counts)) {
				if counts[r] != 0 {
					out = append(out, fmt.Sprintf("%s %q inlinks=%d", table, r, counts[r]))
				}
			}
			for _, r := range slices.Sorted(maps.Keys(anchors)) {
				for _, term := range slices.Sorted(maps.Keys(anchors[r])) {
					if n := anchors[r][term]; n != 0 {
						out = append(out, fmt.Sprintf("%s %q anchor %q=%d", table, r, term, n))
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// A bulk load stores exactly the cells the observers store when the same
// pages are loaded one by one.
func TestBulkLoadStoresWhatTheObserversStore(t *testing.T) {
	c := indextest.NewCorpus(2, 200)
	initial := initialCorpus(c)
	inc := indextest.New(t)
	inc.Load(initial)
	inc.Settle()
	want := dumpIndex(t, inc.DB)

	bulk := indextest.New(t)
	if _, err := bulk.Index.BulkLoad(context.Background(), bulk.DB, parsePages(t, initial), nil); err != nil {
		t.Fatal(err)
	}
	bulk.Settle()
	got := dumpIndex(t, bulk.DB)
	if !slices.Equal(got, want) {
		for _, l := range got {
			if !slices.Contains(want, l) {
				t.Errorf("only bulk: %s", l)
			}
		}
		for _, l := range want {
			if !slices.Contains(got, l) {
				t.Errorf("only incremental: %s", l)
			}
		}
	}
}

// A bulk load passes its cells table by table, each table's rows in order,
// and each term's postings in cluster order. The import then writes
// chunks of disjoint key ranges, which the store takes as they are
// instead of compacting them together.
func TestBulkLoadPassesCellsInKeyOrder(t *testing.T) {
	for name, opts := range map[string]*webindex.Options{"default": nil, "pagerank": pageRankOptions()} {
		t.Run(name, func(t *testing.T) {
			e := indextest.NewWith(t, opts)
			var last [3]string // table, row, posting
			tables := map[string]int{}
			err := webindex.ComputeBulk(context.Background(), e.Index, e.DB, parsePages(t, initialCorpus(indextest.NewCorpus(3, 300))),
				func(table string, row []byte, col framework.Column, value []byte) error {
					k := [3]string{table, string(row)}
					if table == schema.TermsTable {
						k[2] = col.String()
					}
					switch {
					case table != last[0] && tables[table] > 0:
						return fmt.Errorf("%s/%q after %s/%q: back to a table already passed", k[0], k[1], last[0], last[1])
					case table != last[0]:
					case k[1] < last[1]:
						return fmt.Errorf("%s/%q after %s/%q", k[0], k[1], last[0], last[1])
					case table == schema.TermsTable && k[1] == last[1] && k[2] <= last[2]:
						return fmt.Errorf("posting %s:%s after %s:%s", k[1], k[2], last[1], last[2])
					}
					last = k
					tables[table]++
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if len(tables) != 6 || tables[schema.TermsTable] < 100 {
				t.Fatalf("cells by table %v: want all six tables, and hundreds of postings", tables)
			}
		})
	}
}

// Pages written while a bulk load runs, before and after its import, in
// the bulk load's corpus or not, are indexed once and only once.
func TestBulkLoadWithConcurrentLoads(t *testing.T) {
	e := indextest.New(t)
	c := indextest.NewCorpus(3, 160)
	initial := initialCorpus(c)
	var deleted []string
	changeSome := func() map[string]string {
		// Pages of the corpus and others, updated, deleted, added.
		changes := randomChanges(c, &deleted)
		changes[c.URLs[150]] = c.HTML(c.URLs[150])
		changes[c.URLs[151]] = "" // not loaded: nothing to delete
		changes[c.URLs[0]] = c.HTML(c.URLs[0])
		return changes
	}
	c.Apply(initial)
	var o webindex.BulkOptions
	var during []string
	webindex.BulkHooks(&o, func(ctx context.Context) error {
		changes := changeSome()
		e.Load(changes)
		c.Apply(changes)
		during = append(during, fmt.Sprintf("before the import: %d changes", len(changes)))
		return nil
	}, func(ctx context.Context) error {
		changes := changeSome()
		e.Load(changes)
		c.Apply(changes)
		during = append(during, fmt.Sprintf("after the import: %d changes", len(changes)))
		return nil
	})
	st, err := e.Index.BulkLoad(context.Background(), e.DB, parsePages(t, initial), &o)
	if err != nil {
		t.Fatal(err)
	}
	if st.Fenced == 0 {
		t.Fatalf("no page was written under the fence: %+v, %v", st, during)
	}
	e.Settle()
	check(e, c, "after the bulk load")
	after := map[string]string{c.URLs[0]: c.HTML(c.URLs[0]), c.URLs[150]: ""}
	e.Load(after)
	c.Apply(after)
	e.Settle()
	check(e, c, "after more changes")
	if d := dumpIndex(t, e.DB); slices.ContainsFunc(d, func(l string) bool { return strings.HasPrefix(l, schema.FenceTable) }) {
		t.Errorf("the fence table is not empty: %v", d)
	}
}

// A transaction that started before the fence went up and writes a page
// after it is not lost: the import, finding the index written, gives up,
// and the page is indexed as usual.
func TestBulkLoadWithATransactionFromBeforeTheFence(t *testing.T) {
	e := indextest.New(t)
	c := indextest.NewCorpus(4, 60)
	initial := initialCorpus(indextest.NewCorpus(4, 160))
	late := c.URLs[59]
	c.Pages[late] = `<title>late</title>late page <a href="` + c.URLs[1] + `">x</a>`
	began, fenced, wrote := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		wrote <- e.DB.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
			select {
			case <-began: // a retry: the snapshot is after the fence
			default:
				close(began)
				<-fenced
			}
			p, err := extract.Parse(late, strings.NewReader(c.Pages[late]), 1<<20)
			if err != nil {
				return err
			}
			_, err = webindex.PutPage(ctx, tx, p)
			return err
		})
	}()
	<-began
	var o webindex.BulkOptions
	webindex.BulkHooks(&o, func(ctx context.Context) error {
		close(fenced)
		return <-wrote
	}, nil)
	_, err := e.Index.BulkLoad(context.Background(), e.DB, parsePages(t, initial), &o)
	if !errors.Is(err, webindex.ErrNotEmpty) {
		t.Fatalf("bulk load over a page written under the fence: %v", err)
	}
	e.Settle()
	check(e, c, "after the refused bulk load")
}

// A bulk load into an index that is not empty is refused and changes
// nothing.
func TestBulkLoadRefusesANonEmptyIndex(t *testing.T) {
	e := indextest.New(t)
	c := indextest.NewCorpus(5, 40)
	some := map[string]string{c.URLs[0]: c.HTML(c.URLs[0]), c.URLs[1]: c.HTML(c.URLs[1])}
	e.Load(some)
	c.Apply(some)
	e.Settle()
	before := dumpIndex(t, e.DB)
	_, err := e.Index.BulkLoad(context.Background(), e.DB, parsePages(t, initialCorpus(indextest.NewCorpus(5, 160))), nil)
	if !errors.Is(err, webindex.ErrNotEmpty) {
		t.Fatalf("bulk load into a loaded index: %v", err)
	}
	if after := dumpIndex(t, e.DB); !slices.Equal(after, before) {
		t.Fatalf("the refused bulk load changed the index:\n%v\nwas\n%v", after, before)
	}
	check(e, c, "after the refused bulk load")
	// Pages are written as usual: no fence was left up.
	more := map[string]string{c.URLs[2]: c.HTML(c.URLs[2])}
	e.Load(more)
	c.Apply(more)
	e.Settle()
	check(e, c, "loading after the refused bulk load")
}

// failingStore is a pebble store whose Ingest fails once it has been
// called failAt times, as a process that dies during an import leaves it.
type failingStore struct {
	*store.DB
	calls, failAt atomic.Int32
}

var errCrash = errors.New("injected crash during the import")

func (f *failingStore) Ingest(ctx context.Context, txns []*store.RowTxn) error {
	if f.calls.Add(1) >= f.failAt.Load() {
		return errCrash
	}
	return f.DB.Ingest(ctx, txns)
}

// A bulk load that stops half way through its import (spilling, in a tiny
// budget) leaves its fence up and pages loaded meanwhile waiting;
// resuming it completes the index, and aborting one gives an index of
// what was loaded meanwhile.
func TestBulkLoadCrashResumeAbort(t *testing.T) {
	for _, resume := range []bool{true, false} {
		t.Run(fmt.Sprintf("resume=%v", resume), func(t *testing.T) {
			ps, err := store.Open("db", framework.StoreOptions(&store.Options{FS: vfs.NewMem(), Logger: indextest.Quiet, Durability: store.DurabilityNone}))
			if err != nil {
				t.Fatal(err)
			}
			defer ps.Close()
			st := &failingStore{DB: ps}
			st.failAt.Store(3)
			e := indextest.NewOn(t, st)
			c := indextest.NewCorpus(6, 160)
			initial := initialCorpus(c)
			pages := parsePages(t, initial)
			ctx := context.Background()
			_, err = e.Index.BulkLoad(ctx, e.DB, pages, &webindex.BulkOptions{ChunkBytes: 16 << 10, MemoryBytes: webindex.MinBulkMemory})
			if !errors.Is(err, errCrash) {
				t.Fatalf("bulk load with a failing store: %v", err)
			}
			if st.calls.Load() < 3 {
				t.Fatalf("the import wrote %d chunks before failing: not a partial import", st.calls.Load()-1)
			}
			st.failAt.Store(1 << 30)
			// Loads meanwhile wait under the fence.
			meanwhile := map[string]string{c.URLs[0]: c.HTML(c.URLs[0]), c.URLs[155]: c.HTML(c.URLs[155]), c.URLs[5]: ""}
			e.Load(meanwhile)
			if _, err := e.Index.BulkLoad(ctx, e.DB, pages, nil); !errors.Is(err, webindex.ErrBulkLoadInProgress) {
				t.Fatalf("a second bulk load while the fence is up: %v", err)
			}
			if resume {
				c.Apply(initial)
				c.Apply(meanwhile)
				bs, err := e.Index.BulkLoad(ctx, e.DB, pages, &webindex.BulkOptions{Resume: true, ChunkBytes: 16 << 10, MemoryBytes: webindex.MinBulkMemory})
				if err != nil {
					t.Fatal(err)
				}
				if !bs.Resumed || bs.Fenced == 0 {
					t.Fatalf("resumed bulk load: %+v", bs)
				}
			} else {
				c.Apply(meanwhile)
				ok, err := e.Index.AbortBulkLoad(ctx, e.DB)
				if err != nil || !ok {
					t.Fatalf("AbortBulkLoad: %v %v", ok, err)
				}
			}
			e.Settle()
			check(e, c, "after the crash")
			if ok, err := e.Index.AbortBulkLoad(ctx, e.DB); ok || err != nil {
				t.Fatalf("AbortBulkLoad with no bulk load: %v %v", ok, err)
			}
		})
	}
}

// hookStore is a pebble store that calls before, once, ahead of the first
// Ingest: between the import's check that the index is empty and its
// first write.
type hookStore struct {
	*store.DB
	once   sync.Once
	before func()
}

func (h *hookStore) Ingest(ctx context.Context, txns []*store.RowTxn) error {
	h.once.Do(h.before)
	return h.DB.Ingest(ctx, txns)
}

// A transaction that started before the fence went up and commits a page
// after the import checked the index was empty is indexed after the
// import, against it: its page observer, running while the import is
// under way, leaves the page for the fence to renotify.
func TestBulkLoadWithATransactionCommittingDuringTheImport(t *testing.T) {
	for _, inCorpus := range []bool{true, false} {
		t.Run(fmt.Sprintf("in-corpus=%v", inCorpus), func(t *testing.T) {
			ps, err := store.Open("db", framework.StoreOptions(&store.Options{FS: vfs.NewMem(), Logger: indextest.Quiet, Durability: store.DurabilityNone}))
			if err != nil {
				t.Fatal(err)
			}
			defer ps.Close()
			hs := &hookStore{DB: ps}
			e := indextest.NewOn(t, hs)
			c := indextest.NewCorpus(7, 160)
			initial := initialCorpus(c)
			late := c.URLs[150]
			if inCorpus {
				late = c.URLs[10]
			}
			lateHTML := `<title>late</title>late page <a href="` + c.URLs[1] + `">x</a><a href="` + c.URLs[20] + `">y</a>`
			began, release, wrote := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				wrote <- e.DB.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
					select {
					case <-began:
					default:
						close(began)
						<-release
					}
					p, err := extract.Parse(late, strings.NewReader(lateHTML), 1<<20)
					if err != nil {
						return err
					}
					_, err = webindex.PutPage(ctx, tx, p)
					return err
				})
			}()
			<-began
			hs.before = func() {
				close(release)
				if err := <-wrote; err != nil {
					t.Error(err)
				}
				e.Settle() // the page observer has run (and left the page)
			}
			if _, err := e.Index.BulkLoad(context.Background(), e.DB, parsePages(t, initial), nil); err != nil {
				t.Fatal(err)
			}
			c.Apply(initial)
			c.Apply(map[string]string{late: lateHTML})
			e.Settle()
			check(e, c, "after the bulk load")
		})
	}
}

// ingestCounter is a pebble store that counts its Ingest calls.
type ingestCounter struct {
	*store.DB
	calls atomic.Int32
}

func (c *ingestCounter) Ingest(ctx context.Context, txns []*store.RowTxn) error {
	c.calls.Add(1)
	return c.DB.Ingest(ctx, txns)
}

// A bulk load through a store served over NATS, as a loader does through
// a running runner, ingests its chunks into the owner's store (one
// Ingest there per chunk, not row batches) and stores exactly what a bulk
// load into a local store stores.
func TestBulkLoadThroughAStoreService(t *testing.T) {
	ctx := context.Background()
	pages := parsePages(t, initialCorpus(indextest.NewCorpus(4, 200)))
	local := indextest.New(t)
	if _, err := local.Index.BulkLoad(ctx, local.DB, pages, nil); err != nil {
		t.Fatal(err)
	}
	ps, err := store.Open("db", framework.StoreOptions(&store.Options{FS: vfs.NewMem(), Logger: indextest.Quiet, Durability: store.DurabilityNone}))
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	owner := &ingestCounter{DB: ps}
	e := indextest.NewOn(t, remotetest.Serve(t, owner, nil).Store)
	if _, err := e.Index.BulkLoad(ctx, e.DB, pages, &webindex.BulkOptions{ChunkBytes: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	if n := owner.calls.Load(); n < 2 {
		t.Fatalf("%d Ingest calls on the owner's store, want one per chunk (several)", n)
	}
	if got, want := dumpIndex(t, e.DB), dumpIndex(t, local.DB); !slices.Equal(got, want) {
		t.Fatalf("through the service: %d cells, locally %d, or not the same", len(got), len(want))
	}
}
