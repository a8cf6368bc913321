package webindex

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"

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
	// InlinksTotal and OutlinksTotal are the lengths of the whole lists,
	// which the JSON API cuts (see Handler).
	InlinksTotal  int `json:"inlinks_total"`
	OutlinksTotal int `json:"outlinks_total"`
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
	all := anchorLists(doc)
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
func (ix *Index) Page(ctx context.Context, db *framework.DB, url string) (*PageView, error) {
	norm, err := extract.Normalize(url)
	if err != nil {
		return nil, fmt.Errorf("webindex: %w", err)
	}
	var pv *PageView
	err = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		doc, err := loadedDoc(ctx, tx, norm)
		if err != nil {
			return err
		}
		pv = &PageView{URL: norm, Title: doc.Title, TextBytes: int64(len(doc.Text)), Canonical: norm, Duplicates: []string{}, Inlinks: []Inlink{}, Outlinks: []Outlink{}}
		pv.Outlinks = append(pv.Outlinks, outlinks(doc)...)
		pv.OutlinksTotal = len(pv.Outlinks)
		key, err := tx.Get(ctx, PagesTable, []byte(norm), clusterOf)
		if errors.Is(err, framework.ErrNotFound) {
			return nil // not indexed yet
		}
		if err != nil {
			return err
		}
		v, err := ix.computeView(ctx, tx, string(key), true, false)
		if err != nil {
			return err
		}
		pv.Rank = v.ranks[norm]
		pv.Canonical = v.canonical
		pv.InboundCount = v.inbound
		pv.Inlinks = append(pv.Inlinks, v.inlinks...)
		pv.InlinksTotal = len(pv.Inlinks)
		for _, m := range v.members {
			if m != norm {
				pv.Duplicates = append(pv.Duplicates, m)
			}
		}
		return nil
	})
	return pv, err
}

// MaxSearchDepth bounds how deep into a search's ordering a page of
// results may reach (offset + limit): Search keeps that many results in
// memory while the matches stream by.
const MaxSearchDepth = 10000

// SearchRequest asks for one page of a search's results.
type SearchRequest struct {
	// Query is the text searched for: its terms (extract.Terms), at most
	// MaxQueryTerms distinct ones, must all be in a result's text.
	Query string
	// Offset is the number of results skipped; Limit how many are
	// returned (at most Options.MaxResults). Offset + Limit must not
	// exceed MaxSearchDepth.
	Offset, Limit int
	// Snippets asks for each result's Snippet: a passage of its text with
	// the query terms marked, made from its excerpt (see ExcerptBytes),
	// which costs a read of up to ExcerptBytes per result.
	Snippets bool
}

// ResultPage is one page of an ordered list of canonicals.
type ResultPage struct {
	// Total is the number of entries in the whole list. For a top list it
	// is the folded cluster count of the corpus statistics, which lags a
	// little behind the list while the observers catch up.
	Total int `json:"total"`
	// Offset is the position of the first of Results in the list.
	Offset  int      `json:"offset"`
	Results []Result `json:"results"`
}

// Search returns the first limit results of query; see SearchPage.
func (ix *Index) Search(ctx context.Context, db *framework.DB, query string, limit int) (total int, results []Result, err error) {
	p, err := ix.SearchPage(ctx, db, SearchRequest{Query: query, Limit: limit})
	if err != nil {
		return 0, []Result{}, err
	}
	return p.Total, p.Results, nil
}

// SearchPage returns the canonicals whose text contains every term of the
// query, ordered by score (see Scoring) descending, then inbound count
// descending, then URL: Total counts them all, Results holds those from
// Offset on, at most Limit (capped at Options.MaxResults). A query of more
// than MaxQueryTerms distinct terms, or a page beyond MaxSearchDepth, is
// refused with ErrBadQuery.
//
// Search reads every match's posting, cluster state and canonical's
// summary (to score and order them), each query term's postings once more
// to count them (its document frequency) and the corpus statistics; it holds one posting per query term and
// Offset + Limit results in memory, however many pages match.
func (ix *Index) SearchPage(ctx context.Context, db *framework.DB, req SearchRequest) (*ResultPage, error) {
	terms := extract.Terms(req.Query)
	offset, limit := ix.window(req.Offset, req.Limit)
	page := &ResultPage{Offset: offset, Results: []Result{}}
	switch {
	case len(terms) > MaxQueryTerms:
		return page, fmt.Errorf("%w: %d distinct terms, at most %d", ErrBadQuery, len(terms), MaxQueryTerms)
	case offset+limit > MaxSearchDepth:
		return page, fmt.Errorf("%w: results %d to %d asked for, at most %d are ranked", ErrBadQuery, offset, offset+limit, MaxSearchDepth)
	case len(terms) == 0:
		return page, nil
	}
	sc := ix.opts.Scoring.effective()
	err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		c, err := readCorpus(ctx, tx)
		if err != nil {
			return err
		}
		dfs := make([]int64, len(terms))
		n := c.Docs
		for i, t := range terms {
			if dfs[i], err = countPostings(ctx, tx, t); err != nil {
				return err
			}
			n = max(n, dfs[i]) // statistics not yet folded, or an old store's
		}
		avgLen := 1.0
		if c.Docs > 0 && c.Words > 0 {
			avgLen = float64(c.Words) / float64(c.Docs)
		}
		page.Total = 0
		best := &bestResults{limit: offset + limit, order: scoreOrder}
		// Matches are scored in batches, their states and summaries read
		// with one GetRows each: a frequent term has thousands.
		batch := make([]match, 0, scoreBatch)
		flush := func() error {
			defer func() { batch = batch[:0] }()
			states, err := readStates(ctx, tx, batch)
			if err != nil {
				return err
			}
			sums, err := readSummaries(ctx, tx, states)
			if err != nil {
				return err
			}
			for i, m := range batch {
				s := states[i]
				if s == nil {
					continue
				}
				page.Total++
				sum := sums[s.Canonical]
				titleTF := countIn(sum.Title, terms)
				var bm25 float64
				for j := range terms {
					bm25 += sc.termScore(n, dfs[j], m.tfs[j], titleTF[j], s.Words, avgLen)
				}
				best.add(Result{URL: s.Canonical, Title: sum.Title, InboundCount: s.Inbound, TextBytes: sum.TextBytes, Score: bm25 * sc.boost(s.Rank)})
			}
			return nil
		}
		for m, err := range matching(ctx, tx, terms) {
			if err != nil {
				return err
			}
			if batch = append(batch, m); len(batch) == scoreBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := flush(); err != nil {
			return err
		}
		page.Results = best.sorted()[min(offset, best.Len()):]
		if !req.Snippets {
			return nil
		}
		for i := range page.Results {
			text, err := readExcerpt(ctx, tx, page.Results[i].URL)
			if err != nil {
				return err
			}
			page.Results[i].Snippet = makeSnippet(text, terms)
		}
		return nil
	})
	return page, err
}

// scoreBatch is how many matches a search reads the states and summaries
// of at once.
const scoreBatch = 256

// readStates reads the states of the matches' clusters (nil: none).
func readStates(ctx context.Context, tx *framework.Txn, ms []match) ([]*state, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	rows := make([][]byte, len(ms))
	for i, m := range ms {
		rows[i] = []byte(m.key)
	}
	got, err := tx.GetRows(ctx, ClustersTable, rows, []framework.Column{clusterState})
	if err != nil {
		return nil, err
	}
	out := make([]*state, len(ms))
	for i, m := range ms {
		b, ok := got[m.key][clusterState]
		if !ok {
			continue
		}
		if out[i], err = decodeState(b); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", m.key, err)
		}
	}
	return out, nil
}

// readSummaries reads the summaries of the states' canonicals, as
// readSummary does, keyed by URL.
func readSummaries(ctx context.Context, tx *framework.Txn, states []*state) (map[string]summary, error) {
	var rows [][]byte
	for _, s := range states {
		if s != nil {
			rows = append(rows, []byte(s.Canonical))
		}
	}
	out := make(map[string]summary, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	got, err := tx.GetRows(ctx, PagesTable, rows, []framework.Column{summaryCol})
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		u := string(r)
		b, ok := got[u][summaryCol]
		if !ok { // deleted, or stored before summaries
			if out[u], err = readSummary(ctx, tx, u); err != nil {
				return nil, err
			}
			continue
		}
		if out[u], err = decodeSummary(b); err != nil {
			return nil, fmt.Errorf("%s %s: %w", u, summaryCol, err)
		}
	}
	return out, nil
}

// countIn counts how often each of terms occurs in text.
func countIn(text string, terms []string) []int64 {
	out := make([]int64, len(terms))
	if text == "" {
		return out
	}
	for _, f := range strings.FieldsFunc(text, func(r rune) bool { return !isWordRune(r) }) {
		if i, ok := slices.BinarySearch(terms, strings.ToLower(f)); ok {
			out[i]++
		}
	}
	return out
}

// match is a cluster posted under every query term, with the term
// frequencies its postings hold (in query-term order).
type match struct {
	key string
	tfs []int64
}

// matching yields, in key order, the clusters posted under every term: a
// merge of the terms' posting scans, which are in key order, holding one
// open scan and one posting per term.
func matching(ctx context.Context, tx *framework.Txn, terms []string) iter.Seq2[match, error] {
	return func(yield func(match, error) bool) {
		nexts := make([]func() (framework.Entry, error, bool), len(terms))
		for i, t := range terms {
			next, stop := iter.Pull2(tx.Scan(ctx, rowScan(TermsTable, t, postingFamily)))
			defer stop()
			nexts[i] = next
		}
		cur := make([]string, len(terms))
		vals := make([][]byte, len(terms))
		// seek moves term i to its first cluster at or after from; false
		// when it has none (or on error, which it yields).
		seek := func(i int, from string) bool {
			for {
				e, err, ok := nexts[i]()
				switch {
				case !ok:
					return false
				case err != nil:
					yield(match{}, err)
					return false
				case e.Column.Qualifier >= from:
					cur[i], vals[i] = e.Column.Qualifier, e.Value
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
			m := match{key: hi, tfs: make([]int64, len(terms))}
			for i, v := range vals {
				tf, err := decodePosting(v)
				if err != nil {
					yield(match{}, fmt.Errorf("posting of %s under %q: %w", hi, terms[i], err))
					return
				}
				m.tfs[i] = tf
			}
			if !yield(m, nil) {
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
func (ix *Index) Top(ctx context.Context, db *framework.DB, n int) ([]Result, error) {
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
func (ix *Index) TopPage(ctx context.Context, db *framework.DB, offset, limit int) (*ResultPage, error) {
	return ix.listPage(ctx, db, framework.ScanOptions{Table: TopTable, Columns: []framework.Column{topEntry}}, 0, offset, limit, true)
}

// SitePage returns the canonicals on one host (site: a host name, with
// its port if any, or a URL on it), ordered as TopPage orders them, from
// offset on, at most limit. Total counts the host's canonicals by reading
// the keys of its rows.
func (ix *Index) SitePage(ctx context.Context, db *framework.DB, site string, offset, limit int) (*ResultPage, error) {
	host, err := siteName(site)
	if err != nil {
		return &ResultPage{Results: []Result{}}, err
	}
	prefix := append([]byte(host), 0)
	return ix.listPage(ctx, db, framework.ScanOptions{Table: SitesTable, Prefix: prefix, Columns: []framework.Column{topEntry}}, len(prefix), offset, limit, false)
}

// listPage reads a page of a list kept as top-list row keys (after skip
// bytes of prefix) in the rows scan selects. With corpusTotal the total is
// the corpus statistics' cluster count; else the rows are counted.
func (ix *Index) listPage(ctx context.Context, db *framework.DB, scan framework.ScanOptions, skip, offset, limit int, corpusTotal bool) (*ResultPage, error) {
	offset, limit = ix.window(offset, limit)
	page := &ResultPage{Offset: offset, Results: []Result{}}
	err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		page.Results, page.Total = page.Results[:0], 0
		if corpusTotal {
			c, err := readCorpus(ctx, tx)
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
			inbound, canonical, _, err := parseTopRow(e.Row[skip:])
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
		s, err := readSummary(ctx, tx, rs[i].URL)
		if err != nil {
			return err
		}
		rs[i].Title, rs[i].TextBytes = s.Title, s.TextBytes
	}
	return nil
}
