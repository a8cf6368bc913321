package webindex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// ErrPageNotFound is returned by Page for a URL that is not loaded (never
// loaded, or deleted).
var ErrPageNotFound = errors.New("webindex: page not found")

// PageView is what the index knows about one loaded page.
type PageView struct {
	URL   string `json:"url"`
	Title string `json:"title"`
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

// Result is one page of a search result or top list: a canonical.
type Result struct {
	URL          string `json:"url"`
	Title        string `json:"title"`
	InboundCount int64  `json:"inbound_count"`
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
		pv = &PageView{URL: norm, Title: doc.Title, Canonical: norm, Duplicates: []string{}, Inlinks: []Inlink{}, Outlinks: []Outlink{}}
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
// all, results holds the first limit (at most Options.MaxResults).
func (ix *Index) Search(ctx context.Context, db *framework.DB, query string, limit int) (total int, results []Result, err error) {
	terms := extract.Terms(query)
	limit = min(max(limit, 0), ix.opts.MaxResults)
	results = []Result{}
	if len(terms) == 0 {
		return 0, results, nil
	}
	err = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		var keys []string // clusters containing every term so far
		for i, t := range terms {
			var next []string
			for e, err := range tx.Scan(ctx, rowScan(TermsTable, t, postingFamily)) {
				if err != nil {
					return err
				}
				if k := e.Column.Qualifier; i == 0 {
					next = append(next, k)
				} else if _, ok := slices.BinarySearch(keys, k); ok {
					next = append(next, k)
				}
			}
			if keys = next; len(keys) == 0 {
				return nil
			}
		}
		hits := make([]Result, 0, len(keys))
		for _, k := range keys {
			s, err := readState(ctx, tx, k)
			if err != nil {
				return err
			}
			if s != nil {
				hits = append(hits, Result{URL: s.Canonical, InboundCount: s.Inbound})
			}
		}
		slices.SortFunc(hits, func(a, b Result) int {
			return cmp.Or(cmp.Compare(b.InboundCount, a.InboundCount), cmp.Compare(a.URL, b.URL))
		})
		total = len(hits)
		results = hits[:min(limit, len(hits))]
		return titles(ctx, tx, results)
	})
	return total, results, err
}

// Top returns the n canonicals with the most inbound links (at most
// Options.MaxResults), ties by URL.
func (ix *Index) Top(ctx context.Context, db *framework.DB, n int) ([]Result, error) {
	n = min(max(n, 0), ix.opts.MaxResults)
	results := []Result{}
	if n == 0 {
		return results, nil
	}
	err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
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
		return titles(ctx, tx, results)
	})
	return results, err
}

// titles fills in each result's title from its loaded document.
func titles(ctx context.Context, tx *framework.Txn, rs []Result) error {
	for i := range rs {
		doc, err := readDoc(ctx, tx, rs[i].URL, Doc)
		if err != nil {
			return err
		}
		if doc != nil {
			rs[i].Title = doc.Title
		}
	}
	return nil
}
