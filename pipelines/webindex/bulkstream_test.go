package webindex_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"strconv"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// cellsByTable records the cells a bulk computation passes, in order,
// table by table, with the corpus statistics' time left out.
func cellsByTable(t *testing.T) (map[string][]string, func(string, []byte, framework.Column, []byte) error) {
	out := map[string][]string{}
	return out, func(table string, row []byte, col framework.Column, value []byte) error {
		if col == schema.CorpusCol {
			v, err := webindex.CorpusWithoutTime(value)
			if err != nil {
				return err
			}
			value = v
		}
		out[table] = append(out[table], fmt.Sprintf("%q %s %q", row, col, value))
		return nil
	}
}

// generatedPages is a corpus of the sample generator: sites, duplicates,
// hubs.
func generatedPages(t *testing.T, seed int64, n int) map[string]*extract.Page {
	t.Helper()
	pages, err := sample.Generate(seed, n).Pages()
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// The streaming bulk computation passes exactly the cells the in-memory
// one did, in the same order within each table, whether everything fits
// in its budget or a tiny budget makes every sorter spill many runs; on
// the tests' corpus and on a generated one, with PageRank and without.
func TestBulkComputationEqualsTheInMemoryOne(t *testing.T) {
	corpora := map[string]map[string]*extract.Page{
		"tests":     parsePages(t, initialCorpus(indextest.NewCorpus(8, 300))),
		"generated": generatedPages(t, 3, 1500),
	}
	for _, cname := range []string{"tests", "generated"} {
		pages := corpora[cname]
		for _, oname := range []string{"default", "pagerank"} {
			opts := map[string]*webindex.Options{"default": nil, "pagerank": pageRankOptions()}[oname]
			t.Run(cname+"/"+oname, func(t *testing.T) {
				e := indextest.NewWith(t, opts)
				ctx := context.Background()
				want, set := cellsByTable(t)
				if err := webindex.ComputeBulkInMemory(ctx, e.Index, e.DB, pages, set); err != nil {
					t.Fatal(err)
				}
				for _, memory := range []int64{0, webindex.MinBulkMemory} {
					got, set := cellsByTable(t)
					dir := t.TempDir()
					st, err := webindex.ComputeBulkWith(ctx, e.Index, e.DB, pages, &webindex.BulkOptions{MemoryBytes: memory, TempDir: dir}, set)
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case st.Pages != len(pages):
						t.Errorf("budget %d: %d pages, want %d", memory, st.Pages, len(pages))
					case memory == 0 && st.Spills != 0:
						t.Errorf("default budget: %d runs spilled for %d pages", st.Spills, len(pages))
					case memory != 0 && st.Spills < 20:
						t.Errorf("budget %d: only %d runs spilled (%d bytes): the budget is not held to", memory, st.Spills, st.SpilledBytes)
					}
					if ents, _ := os.ReadDir(dir); len(ents) != 0 {
						t.Errorf("budget %d: %d files left in the spill directory", memory, len(ents))
					}
					for _, table := range slices.Sorted(func(yield func(string) bool) {
						for k := range want {
							if !yield(k) {
								return
							}
						}
					}) {
						if g, w := got[table], want[table]; !slices.Equal(g, w) {
							i := 0
							for i < min(len(g), len(w)) && g[i] == w[i] {
								i++
							}
							t.Errorf("budget %d, table %s: %d cells, want %d; first difference at %d", memory, table, len(g), len(w), i)
							if i < len(g) {
								t.Logf("got  %s", g[i])
							}
							if i < len(w) {
								t.Logf("want %s", w[i])
							}
						}
					}
					if len(got) != len(want) {
						t.Errorf("budget %d: %d tables, want %d", memory, len(got), len(want))
					}
				}
			})
		}
	}
}

// A bulk load in a budget so small that it spills many runs builds the
// index the observers would, and one a bulk load within its budget
// builds; a load killed half way through it resumes.
func TestBulkLoadInATinyBudget(t *testing.T) {
	c := indextest.NewCorpus(9, 200)
	initial := initialCorpus(c)
	pages := parsePages(t, initial)
	ctx := context.Background()
	roomy := indextest.New(t)
	if _, err := roomy.Index.BulkLoad(ctx, roomy.DB, pages, nil); err != nil {
		t.Fatal(err)
	}
	e := indextest.New(t)
	dir := t.TempDir()
	st, err := e.Index.BulkLoad(ctx, e.DB, pages, &webindex.BulkOptions{MemoryBytes: webindex.MinBulkMemory, TempDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if st.Spills < 20 || st.Pages != len(pages) {
		t.Fatalf("stats %+v: want many spills", st)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("%d entries left in the spill directory", len(ents))
	}
	if got, want := dumpIndex(t, e.DB), dumpIndex(t, roomy.DB); !slices.Equal(got, want) {
		t.Fatalf("in a tiny budget: %d cells, in a roomy one %d, or not the same", len(got), len(want))
	}
	c.Apply(initial)
	e.Settle()
	check(e, c, "bulk load in a tiny budget")
}

// pagesInOrder yields pages in the order of urls.
func pagesInOrder(pages map[string]*extract.Page, urls []string) iter.Seq2[*extract.Page, error] {
	return func(yield func(*extract.Page, error) bool) {
		for _, u := range urls {
			if !yield(pages[u], nil) {
				return
			}
		}
	}
}

// A stream of pages out of order, with a page twice, or failing, stops
// the load with its fence up and nothing left in the spill directory; a
// load that resumes it with the stream in order completes the index.
func TestBulkLoadSortedRefusesAStreamOutOfOrder(t *testing.T) {
	c := indextest.NewCorpus(10, 160)
	initial := initialCorpus(c)
	pages := parsePages(t, initial)
	urls := slices.Sorted(func(yield func(string) bool) {
		for u := range pages {
			if !yield(u) {
				return
			}
		}
	})
	ctx := context.Background()
	e := indextest.New(t)
	dir := t.TempDir()
	opts := &webindex.BulkOptions{TempDir: dir, MemoryBytes: webindex.MinBulkMemory}
	errInput := errors.New("input failed")
	for name, stream := range map[string]iter.Seq2[*extract.Page, error]{
		"swapped": pagesInOrder(pages, append([]string{urls[1], urls[0]}, urls[2:]...)),
		"twice":   pagesInOrder(pages, append([]string{urls[0]}, urls...)),
		"failing": func(yield func(*extract.Page, error) bool) {
			for p, err := range pagesInOrder(pages, urls[:100]) {
				if !yield(p, err) {
					return
				}
			}
			yield(nil, errInput)
		},
	} {
		o := *opts
		o.Resume = name != "swapped" // the first leaves the fence up
		_, err := e.Index.BulkLoadSorted(ctx, e.DB, stream, &o)
		if err == nil || (name == "failing" && !errors.Is(err, errInput)) {
			t.Fatalf("%s: %v", name, err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("%s: %d entries left in the spill directory", name, len(ents))
		}
	}
	o := *opts
	o.Resume = true
	st, err := e.Index.BulkLoadSorted(ctx, e.DB, pagesInOrder(pages, urls), &o)
	if err != nil || !st.Resumed || st.Pages != len(pages) {
		t.Fatalf("resumed in order: %+v, %v", st, err)
	}
	c.Apply(initial)
	e.Settle()
	check(e, c, "after the refused streams")
}

// A bulk load whose context ends while it computes stops with the
// context's error and removes what it spilled.
func TestBulkLoadCancelled(t *testing.T) {
	pages := parsePages(t, initialCorpus(indextest.NewCorpus(11, 160)))
	e := indextest.New(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	_, err := webindex.ComputeBulkWith(ctx, e.Index, e.DB, pages, &webindex.BulkOptions{TempDir: dir, MemoryBytes: webindex.MinBulkMemory},
		func(string, []byte, framework.Column, []byte) error {
			if n++; n == 500 {
				cancel()
			}
			return nil
		})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled computation: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("%d entries left in the spill directory", len(ents))
	}
}

// A generated corpus bulk-loaded in a budget that makes it spill equals
// the batch computation of it (Index.Verify: every page, the top lists,
// searches for frequent, rare and absent words). TRICKLE_BULK_VERIFY_PAGES
// sets the corpus's size (default 3,000), to check at scale by hand.
func TestBulkLoadOfAGeneratedCorpusEqualsBatch(t *testing.T) {
	n := 3000
	if s := os.Getenv("TRICKLE_BULK_VERIFY_PAGES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	pages := generatedPages(t, 5, n)
	e := indextest.New(t)
	ctx := context.Background()
	memory := max(int64(n)*200, webindex.MinBulkMemory) // far less than the corpus
	st, err := e.Index.BulkLoad(ctx, e.DB, pages, &webindex.BulkOptions{MemoryBytes: memory, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if st.Spills < 10 {
		t.Fatalf("stats %+v: want spills", st)
	}
	queries := []string{sample.Word(0), sample.Word(1) + " " + sample.Word(2), sample.Word(50), sample.Word(5000), sample.ScriptWord}
	checked, diffs, err := e.Index.Verify(ctx, e.DB, batch.Compute(pages), nil, queries, 10)
	if err != nil {
		t.Fatal(err)
	}
	if checked != n || len(diffs) > 0 {
		t.Fatalf("checked %d of %d pages; %d differences, first %v", checked, n, len(diffs), diffs[:min(len(diffs), 5)])
	}
}
