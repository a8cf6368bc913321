package query

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"
)

// Engine answers queries of the index: pages, searches, top lists and
// links, read from the cells the observers keep.
type Engine struct {
	opts Options
}

// Options configure an Engine; they are the query side of webindex.Options.
type Options struct {
	// Ranker is the one that chose the canonicals: its rank of a
	// canonical weighs in its search score.
	Ranker ranking.Ranker
	// Scoring orders search results.
	Scoring scoring.Params
	// MaxResults bounds a search's limit and a top list's length.
	MaxResults int
}

// New returns an Engine with opts, which must be complete
// (webindex.Options.EnsureDefaults fills them).
func New(opts Options) *Engine { return &Engine{opts: opts} }

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
	InboundCount int64           `json:"inbound_count"`
	Inlinks      []schema.Inlink `json:"inlinks"`
	// Outlinks are the page's own links.
	Outlinks []Outlink `json:"outlinks"`
	// InlinksTotal and OutlinksTotal are the lengths of the whole lists,
	// which the JSON API cuts (see Handler).
	InlinksTotal  int `json:"inlinks_total"`
	OutlinksTotal int `json:"outlinks_total"`
	// AsOf is the past snapshot the page was read in, when one was asked
	// for (PageAt).
	AsOf *Snapshot `json:"as_of,omitempty"`
}

// Outlink is a link out of a page: its target, first non-empty anchor
// text, and all its anchor texts in document order (empty when none).
type Outlink struct {
	Target  string   `json:"target"`
	Anchor  string   `json:"anchor"`
	Anchors []string `json:"anchors"`
}

// outlinks lists the links of doc.
func outlinks(doc *extract.Page) []Outlink {
	all := schema.AnchorLists(doc)
	out := make([]Outlink, 0, len(doc.Links))
	for _, l := range doc.Links {
		as := all[l.Target]
		if as == nil {
			as = []string{}
		}
		out = append(out, Outlink{Target: l.Target, Anchor: l.Anchor, Anchors: as})
	}
	return out
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
	// Score is a search result's score (see Scoring); 0 in other lists.
	Score float64 `json:"score,omitempty"`
	// Snippet is a passage of a search result's text with the query
	// terms marked, when asked for (SearchRequest.Snippets).
	Snippet *Snippet `json:"snippet,omitempty"`
}

// Page returns what the index knows about url, in one snapshot. url may be
// spelled any way extract.Normalize maps to the page's key; PageView.URL is
// that key. A url Normalize rejects is an error wrapping extract.ErrBadURL.
//
// Page reports the page's loaded document, and the cluster as the page
// observer last indexed it: until the observers have caught up with a fresh
// load, duplicates and inlinks may lag behind the document.
func (ix *Engine) Page(ctx context.Context, db *framework.DB, url string) (*PageView, error) {
	return ix.PageAt(ctx, db, url, 0)
}

// PageAt is Page as of the timestamp asOf (framework.TimestampAt,
// ParseAsOf): the page as the index held it then, within the history
// garbage collection keeps (see framework.DB.ViewAt); 0 means now. A page
// not loaded then is ErrPageNotFound.
func (ix *Engine) PageAt(ctx context.Context, db *framework.DB, url string, asOf uint64) (*PageView, error) {
	norm, err := extract.Normalize(url)
	if err != nil {
		return nil, fmt.Errorf("webindex: %w", err)
	}
	var pv *PageView
	err = viewAt(ctx, db, asOf, func(ctx context.Context, tx *framework.Txn) error {
		doc, err := loadedDoc(ctx, tx, norm)
		if err != nil {
			return err
		}
		pv = &PageView{URL: norm, Title: doc.Title, TextBytes: int64(len(doc.Text)), Canonical: norm, Duplicates: []string{}, Inlinks: []schema.Inlink{}, Outlinks: []Outlink{}, AsOf: snapshotAt(asOf)}
		pv.Outlinks = append(pv.Outlinks, outlinks(doc)...)
		pv.OutlinksTotal = len(pv.Outlinks)
		key, err := tx.Get(ctx, schema.PagesTable, []byte(norm), schema.ClusterOf)
		if errors.Is(err, framework.ErrNotFound) {
			return nil // not indexed yet
		}
		if err != nil {
			return err
		}
		v, err := ranking.ComputeView(ctx, tx, ix.opts.Ranker, string(key), true, false)
		if err != nil {
			return err
		}
		pv.Rank = v.Ranks[norm]
		pv.Canonical = v.Canonical
		pv.InboundCount = v.Inbound
		pv.Inlinks = append(pv.Inlinks, v.Inlinks...)
		pv.InlinksTotal = len(pv.Inlinks)
		for _, m := range v.Members {
			if m != norm {
				pv.Duplicates = append(pv.Duplicates, m)
			}
		}
		return nil
	})
	return pv, err
}

// listOrder orders results as lists show them: more inbound links first,
// then smaller URL.
func listOrder(a, b Result) int {
	return cmp.Or(cmp.Compare(b.InboundCount, a.InboundCount), cmp.Compare(a.URL, b.URL))
}

// scoreOrder orders search results: higher score first, then list order.
func scoreOrder(a, b Result) int {
	return cmp.Or(cmp.Compare(b.Score, a.Score), listOrder(a, b))
}

// bestResults keeps, of the results added, the limit that come first in
// order: a heap with the last one kept on top, where a better result
// replaces it.
type bestResults struct {
	limit int
	order func(a, b Result) int
	h     []Result
}

func (b *bestResults) Len() int           { return len(b.h) }
func (b *bestResults) Less(i, j int) bool { return b.order(b.h[j], b.h[i]) < 0 }
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
	case len(b.h) > 0 && b.order(r, b.h[0]) < 0:
		b.h[0] = r
		heap.Fix(b, 0)
	}
}

// sorted returns the kept results in order.
func (b *bestResults) sorted() []Result {
	out := append([]Result{}, b.h...)
	slices.SortFunc(out, b.order)
	return out
}

// Top returns the n canonicals with the most inbound links (at most
// Options.MaxResults), ties by URL; see TopPage.
func (ix *Engine) Top(ctx context.Context, db *framework.DB, n int) ([]Result, error) {
	p, err := ix.TopPage(ctx, db, 0, n)
	if err != nil {
		return []Result{}, err
	}
	return p.Results, nil
}

// TopPage returns the canonicals by inbound count descending, then URL,
// from offset on, at most limit (capped at Options.MaxResults). It reads
// offset + limit rows of the top table (small cells) and the returned
// canonicals' summaries.
func (ix *Engine) TopPage(ctx context.Context, db *framework.DB, offset, limit int) (*ResultPage, error) {
	return ix.listPage(ctx, db, framework.ScanOptions{Table: schema.TopTable, Columns: []framework.Column{schema.TopEntry}}, 0, offset, limit, true)
}

// SitePage returns the canonicals on one host (site: a host name, with
// its port if any, or a URL on it), ordered as TopPage orders them, from
// offset on, at most limit. Total counts the host's canonicals by reading
// the keys of its rows.
func (ix *Engine) SitePage(ctx context.Context, db *framework.DB, site string, offset, limit int) (*ResultPage, error) {
	host, err := siteName(site)
	if err != nil {
		return &ResultPage{Results: []Result{}}, err
	}
	prefix := append([]byte(host), 0)
	return ix.listPage(ctx, db, framework.ScanOptions{Table: schema.SitesTable, Prefix: prefix, Columns: []framework.Column{schema.TopEntry}}, len(prefix), offset, limit, false)
}

// listPage reads a page of a list kept as top-list row keys (after skip
// bytes of prefix) in the rows scan selects. With corpusTotal the total is
// the corpus statistics' cluster count; else the rows are counted.
func (ix *Engine) listPage(ctx context.Context, db *framework.DB, scan framework.ScanOptions, skip, offset, limit int, corpusTotal bool) (*ResultPage, error) {
	offset, limit = ix.window(offset, limit)
	page := &ResultPage{Offset: offset, Results: []Result{}}
	err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		page.Results, page.Total = page.Results[:0], 0
		if corpusTotal {
			c, err := schema.ReadCorpus(ctx, tx)
			if err != nil {
				return err
			}
			page.Total = int(c.Clusters)
		}
		i := 0
		for e, err := range tx.Scan(ctx, scan) {
			if err != nil {
				return err
			}
			i++
			if i <= offset {
				continue
			}
			if len(page.Results) == limit {
				if corpusTotal {
					break
				}
				continue
			}
			inbound, canonical, _, err := schema.ParseTopRow(e.Row[skip:])
			if err != nil {
				return err
			}
			page.Results = append(page.Results, Result{URL: canonical, InboundCount: inbound})
		}
		if !corpusTotal {
			page.Total = i
		}
		return describe(ctx, tx, page.Results)
	})
	return page, err
}

// describe fills in each result's title and text length from its
// canonical's summary.
func describe(ctx context.Context, tx *framework.Txn, rs []Result) error {
	for i := range rs {
		s, err := schema.ReadSummary(ctx, tx, rs[i].URL)
		if err != nil {
			return err
		}
		rs[i].Title, rs[i].TextBytes = s.Title, s.TextBytes
	}
	return nil
}
