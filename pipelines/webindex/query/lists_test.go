package query_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/query"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// The large-page corpus: bigPages pages of about bigBytes of text each,
// every one its own cluster, all containing "common" and linking to a
// small hub page (which has a duplicate). The first big page also has
// vocabTerms distinct words, so its cluster posts that many terms, and a
// title longer than a result title.
const (
	bigPages   = 4
	bigBytes   = 2 << 20
	vocabTerms = 5000
	hubURL     = "http://hub.example/"
)

func bigCorpus() []*extract.Page {
	hubLink := []extract.Link{{Target: hubURL, Anchor: "hub"}}
	pages := []*extract.Page{
		{URL: hubURL, Title: "Hub", Text: "hub page common"},
		{URL: hubURL + "copy", Title: "Hub copy", Text: "hub page common"},
	}
	for i := range bigPages {
		var b strings.Builder
		fmt.Fprintf(&b, "page%d common ", i)
		title := fmt.Sprintf("Big %d", i)
		if i == 0 {
			for w := range vocabTerms {
				fmt.Fprintf(&b, "w%05d ", w)
			}
			title = strings.Repeat("Ä", schema.MaxTitleBytes)
		}
		for b.Len() < bigBytes {
			b.WriteString("filler ")
		}
		pages = append(pages, &extract.Page{URL: fmt.Sprintf("http://big%d.example/p", i), Title: title, Text: b.String(), Links: hubLink})
	}
	return pages
}

type listReply struct {
	Total   int
	Results []query.Result
}

// TestListsOfLargePages checks that top lists, searches and the lists in
// a page's view read small cells rather than the documents of the pages
// they list, and that concurrent top lists allocate far less than one
// document each.
func TestListsOfLargePages(t *testing.T) {
	e := indextest.New(t)
	ctx := context.Background()
	pages := bigCorpus()
	e.Put(pages...)
	e.Settle()
	want := batch.Compute(indextest.PageMap(pages))
	queries := []string{"common", "w00042 common", "hub page", "filler page3"}
	if _, diffs, err := e.Index.Verify(ctx, e.DB, want, nil, queries, 10); err != nil || len(diffs) > 0 {
		t.Fatalf("index differs from the batch computation: %v %q", err, diffs)
	}

	t.Run("reads", func(t *testing.T) {
		if frameworktest.OnTiKV() {
			t.Skip("counts the reads of the engine over a store's cells")
		}
		cs := &indextest.CountingStore{Store: e.Store}
		h := e.Index.Handler(e.Reader(cs), indextest.Quiet)
		for _, tt := range []struct {
			path    string
			results int
			extra   int64 // bytes read beyond readBudget
		}{
			{"/api/top?n=30", bigPages + 1, 0},
			{"/api/search?q=common&limit=30", bigPages + 1, 0},
			// A query of several words reranks its best results by
			// their excerpts, and a snippet is made from the excerpt
			// read: neither reads a document.
			{"/api/search?q=w00042+common", 1, schema.ExcerptBytes},
			{"/api/search?q=w00042+common&snippets=1", 1, schema.ExcerptBytes},
			{"/api/page?url=" + url.QueryEscape(hubURL), 0, 0},
		} {
			cs.Bytes.Store(0)
			var reply listReply
			if rec := indextest.Serve(t, h, tt.path, &reply); rec.Code != http.StatusOK {
				t.Fatalf("GET %s: status %d: %s", tt.path, rec.Code, rec.Body)
			}
			if len(reply.Results) != tt.results {
				t.Fatalf("GET %s: %d results, want %d", tt.path, len(reply.Results), tt.results)
			}
			n := cs.Bytes.Load()
			t.Logf("GET %s read %d bytes of cell values", tt.path, n)
			if n > indextest.ReadBudget+tt.extra {
				t.Errorf("GET %s read %d bytes of cell values, want at most %d (a document has %d)", tt.path, n, indextest.ReadBudget+tt.extra, bigBytes)
			}
		}
	})

	t.Run("allocations", func(t *testing.T) {
		e.FW.StopObservers() // their polling would count as the requests' allocations
		const requests = 32
		ix, err := webindex.New(&webindex.Options{MaxConcurrentQueries: requests})
		if err != nil {
			t.Fatal(err)
		}
		h := ix.Handler(e.DB, indextest.Quiet)
		indextest.Serve(t, h, "/api/top?n=30", nil) // warm up caches
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var wg sync.WaitGroup
		codes := make(chan int, requests)
		for range requests {
			wg.Go(func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/top?n=30", nil))
				codes <- rec.Code
			})
		}
		wg.Wait()
		runtime.ReadMemStats(&after)
		close(codes)
		for c := range codes {
			if c != http.StatusOK {
				t.Fatalf("status %d", c)
			}
		}
		per := (after.TotalAlloc - before.TotalAlloc) / requests
		t.Logf("%d concurrent top lists of %d pages of %d bytes: %d bytes allocated per request", requests, bigPages+1, bigBytes, per)
		// A top list allocates some 20 KB (ten times that in a race build,
		// whose sync.Pool drops the store's pooled iterators at random);
		// reading the documents it lists allocates more than 20 MB.
		budget := uint64(bigBytes / 16)
		if indextest.RaceEnabled {
			budget = bigBytes / 4
		}
		if per > budget {
			t.Errorf("a top list allocated %d bytes, want at most %d (a document has %d)", per, budget, bigBytes)
		}
	})
}

// BenchmarkListsOfLargePages serves top lists and searches over pages of
// bigBytes of text each; see TestListsOfLargePages for their bounds.
func BenchmarkListsOfLargePages(b *testing.B) {
	e := indextest.New(b)
	e.Put(bigCorpus()...)
	e.Settle()
	e.FW.StopObservers()
	h := e.Index.Handler(e.DB, indextest.Quiet)
	for _, path := range []string{"/api/top?n=30", "/api/search?q=common&limit=30"} {
		b.Run(strings.TrimPrefix(path[:strings.IndexByte(path, '?')], "/api/"), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d", path, rec.Code)
				}
			}
		})
	}
}
