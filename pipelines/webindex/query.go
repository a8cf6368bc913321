package webindex

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// ErrPageNotFound is returned by Page for a URL that is not loaded (never
// loaded, or deleted).
var ErrPageNotFound = errors.New("webindex: page not found")

// ErrBadQuery is wrapped by the error Search returns for a query it
// refuses to run.
var ErrBadQuery = errors.New("webindex: bad query")

// MaxQueryTerms bounds the distinct terms of a search query. Search keeps
// one scan open per term, so a query pasted from a whole document must not
// open thousands.
const MaxQueryTerms = 32

// PageView is what the index knows about one loaded page.
type PageView struct {
	URL string `json:"url"`
	// Title is the page's whole title.
	Title string `json:"title"`
	// TextBytes is the length of the page's text in bytes.
	TextBytes int64 `json:"text_bytes"`
	// Canonical is the URL that represents the page's duplicate cluster in
	// search results and top lists (the page itself if it is canonical).
	Canonical string `json:"canonical"`
	// Duplicates are the other pages with the same text, sorted.
	Duplicates []string `json:"duplicates"`
	// Rank is the page's own rank (by default, the number of loaded pages
	// linking to it).
	Rank int64 `json:"rank"`
	// InboundCount and Inlinks are the canonical's: links from outside the
	// cluster into any of its members, and their distinct sources.
	InboundCount int64    `json:"inbound_count"`
	Inlinks      []Inlink `json:"inlinks"`
	// Outlinks are the page's own links.
	Outlinks []Outlink `json:"outlinks"`
}

// Outlink is a link out of a page.
type Outlink struct {
	Target string `json:"target"`
	Anchor string `json:"anchor"`
}

// Result is one page of a search result or top list: a canonical. It is
// made from the page's summary, never from its document.
type Result struct {
	URL string `json:"url"`
	// Title is the page's title cut to at most MaxTitleBytes bytes.
	Title        string `json:"title"`
	InboundCount int64  `json:"inbound_count"`
	// TextBytes is the length of the page's text in bytes.
	TextBytes int64 `json:"text_bytes"`
}

// Page returns what the index knows about url, in one snapshot. url may be
// spelled any way extract.Normalize maps to the page's key; PageView.URL is
// that key. A url Normalize rejects is an error wrapping extract.ErrBadURL.
//
// Page reports the page's loaded document, and the cluster as the page
// observer last indexed it: until the observers have caught up with a fresh
// load, duplicates and inlinks may lag behind the document.
func (ix *Index) Page(ctx context.Context, db *framework.DB, url string) (*PageView, error) {
	norm, err := extract.Normalize(url)
	if err != nil {
		return nil, fmt.Errorf("webindex: %w", err)
	}
	var pv *PageView
	err = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		doc, err := readDoc(ctx, tx, norm, Doc)
		if err != nil {
			return err
		}
		if doc == nil {
			return fmt.Errorf("%w: %s", ErrPageNotFound, norm)
		}
		pv = &PageView{URL: norm, Title: doc.Title, TextBytes: int64(len(doc.Text)), Canonical: norm, Duplicates: []string{}, Inlinks: []Inlink{}, Outlinks: []Outlink{}}
		for _, l := range doc.Links {
			pv.Outlinks = append(pv.Outlinks, Outlink(l))
		}
		key, err := tx.Get(ctx, PagesTable, []byte(norm), clusterOf)
		if errors.Is(err, framework.ErrNotFound) {
			return nil // not indexed yet
		}
		if err != nil {
			return err
		}
		v, err := ix.computeView(ctx, tx, string(key), true)
		if err != nil {
			return err
		}
		pv.Rank = v.ranks[norm]
		pv.Canonical = v.canonical
		pv.InboundCount = v.inbound
		pv.Inlinks = append(pv.Inlinks, v.inlinks...)
		for _, m := range v.members {
			if m != norm {
				pv.Duplicates = append(pv.Duplicates, m)
			}
		}
		return nil
	})
	return pv, err
}

// Search returns the canonicals whose text contains every term of query
// (extract.Terms), by inbound count descending, then URL; total counts them
// all, results holds the first limit (at most Options.MaxResults). A query
// of more than MaxQueryTerms distinct terms is refused with ErrBadQuery.
//
// Search reads every match's cluster state (to count and order them) and
// the summaries of the results it returns; it holds no more than one
// posting per query term and limit results in memory, however many pages
// match.
func (ix *Index) Search(ctx context.Context, db *framework.DB, query string, limit int) (total int, results []Result, err error) {
	terms := extract.Terms(query)
	limit = min(max(limit, 0), ix.opts.MaxResults)
	results = []Result{}
	if len(terms) == 0 {
		return 0, results, nil
	}
	if len(terms) > MaxQueryTerms {
		return 0, results, fmt.Errorf("%w: %d distinct terms, at most %d", ErrBadQuery, len(terms), MaxQueryTerms)
	}
	err = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		total = 0
		best := &bestResults{limit: limit}
		for k, err := range matching(ctx, tx, terms) {
			if err != nil {
				return err
			}
			s, err := readState(ctx, tx, k)
			if err != nil {
				return err
			}
			if s != nil {
				total++
				best.add(Result{URL: s.Canonical, InboundCount: s.Inbound})
			}
		}
		results = best.sorted()
		return describe(ctx, tx, results)
	})
	return total, results, err
}

// matching yields, in key order, the clusters posted under every term: a
// merge of the terms' posting scans, which are in key order, holding one
// open scan and one posting per term.
func matching(ctx context.Context, tx *framework.Txn, terms []string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		nexts := make([]func() (framework.Entry, error, bool), len(terms))
		for i, t := range terms {
			next, stop := iter.Pull2(tx.Scan(ctx, rowScan(TermsTable, t, postingFamily)))
			defer stop()
			nexts[i] = next
		}
		cur := make([]string, len(terms))
		// seek moves term i to its first cluster at or after from; false
		// when it has none (or on error, which it yields).
		seek := func(i int, from string) bool {
			for {
				e, err, ok := nexts[i]()
				switch {
				case !ok:
					return false
				case err != nil:
					yield("", err)
					return false
				case e.Column.Qualifier >= from:
					cur[i] = e.Column.Qualifier
					return true
				}
			}
		}
		for i := range terms {
			if !seek(i, "") {
				return
			}
		}
		for {
			hi := slices.Max(cur)
			agree := true
			for i := range cur {
				if cur[i] < hi {
					agree = false
					if !seek(i, hi) {
						return
					}
				}
			}
			if !agree {
				continue
			}
			if !yield(hi, nil) {
				return
			}
			for i := range cur {
				if !seek(i, hi+"\x00") { // the next key after hi
					return
				}
			}
		}
	}
}

// listOrder orders results as lists show them: more inbound links first,
// then smaller URL.
func listOrder(a, b Result) int {
	return cmp.Or(cmp.Compare(b.InboundCount, a.InboundCount), cmp.Compare(a.URL, b.URL))
}

// bestResults keeps, of the results added, the limit that come first in
// list order: a heap with the last one kept on top, where a better result
// replaces it.
type bestResults struct {
	limit int
	h     []Result
}

func (b *bestResults) Len() int           { return len(b.h) }
func (b *bestResults) Less(i, j int) bool { return listOrder(b.h[j], b.h[i]) < 0 }
func (b *bestResults) Swap(i, j int)      { b.h[i], b.h[j] = b.h[j], b.h[i] }
func (b *bestResults) Push(x any)         { b.h = append(b.h, x.(Result)) }
func (b *bestResults) Pop() any {
	r := b.h[len(b.h)-1]
	b.h = b.h[:len(b.h)-1]
	return r
}

func (b *bestResults) add(r Result) {
	switch {
	case len(b.h) < b.limit:
		heap.Push(b, r)
	case len(b.h) > 0 && listOrder(r, b.h[0]) < 0:
		b.h[0] = r
		heap.Fix(b, 0)
	}
}

// sorted returns the kept results in list order.
func (b *bestResults) sorted() []Result {
	out := append([]Result{}, b.h...)
	slices.SortFunc(out, listOrder)
	return out
}

// Top returns the n canonicals with the most inbound links (at most
// Options.MaxResults), ties by URL. It reads the top table's first n rows
// and the n canonicals' summaries.
func (ix *Index) Top(ctx context.Context, db *framework.DB, n int) ([]Result, error) {
	n = min(max(n, 0), ix.opts.MaxResults)
	results := []Result{}
	if n == 0 {
		return results, nil
	}
	err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		results = results[:0]
		for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: TopTable, Columns: []framework.Column{topEntry}}) {
			if err != nil {
				return err
			}
			inbound, canonical, _, err := parseTopRow(e.Row)
			if err != nil {
				return err
			}
			if results = append(results, Result{URL: canonical, InboundCount: inbound}); len(results) == n {
				break
			}
		}
		return describe(ctx, tx, results)
	})
	return results, err
}

// describe fills in each result's title and text length from its
// canonical's summary.
func describe(ctx context.Context, tx *framework.Txn, rs []Result) error {
	for i := range rs {
		s, err := readSummary(ctx, tx, rs[i].URL)
		if err != nil {
			return err
		}
		rs[i].Title, rs[i].TextBytes = s.Title, s.TextBytes
	}
	return nil
}
