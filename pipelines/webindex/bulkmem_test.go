package webindex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// memBulkCluster is one duplicate cluster of a bulk computation.
type memBulkCluster struct {
	key     string
	members []string // sorted
	text    string
}

// memComputeBulk computes the index of pages as the observers leave it once
// every page is loaded and no notification is pending, and passes every
// cell to set: what PutPage writes (document, summary), what the page
// observer writes (indexed copy, cluster, inlink cells on the targets'
// rows, membership), the inlink counts (folded: no queued changes), and
// what the cluster observer writes (state, terms, postings, top entry),
// and with Options.PageRank each page's PageRank state, settled.
// The values are made by the encoders the observers use.
//
// It passes the cells table by table, each table's rows in order: the
// import's chunks then cover disjoint key ranges, and the store links
// each in as it is. Passed page by page, every chunk of page rows spanned
// the whole table (a page's inlink cells are on its targets' rows), and
// the store compacted the chunks together afterwards. Writing the chunks
// is most of the work, so the computing is done while they are written:
// the term counts, postings and clusters' states while the page rows are;
// then come the postings (most of the cells), and the clusters, sites,
// stats and top tables.
func (ix *Index) memComputeBulk(ctx context.Context, db *framework.DB, pages map[string]*extract.Page, set schema.SetFunc) error {
	urls := make([]string, 0, len(pages))
	for u := range pages {
		urls = append(urls, u)
	}
	slices.Sort(urls)

	// Cluster keys hash whole texts: the costliest per-page step but
	// term extraction, so it runs on every core.
	// The anchor terms of each link too.
	keys := make([]string, len(urls))
	linkTerms := make([]map[string][]string, len(urls))
	for i, u := range urls {
		keys[i] = schema.ClusterKey(pages[u])
		linkTerms[i] = memAnchorTermLists(pages[u])
	}

	clusters := map[string]*memBulkCluster{}
	in := map[string][]memBulkInlink{}            // each URL's inlinks, by source (urls are sorted)
	anchorCounts := map[string]map[string]int64{} // each URL's anchor term counts
	var links, anchorTerms int64
	for i, u := range urls {
		p := pages[u]
		for target, anchor := range schema.Anchors(p) {
			terms := linkTerms[i][target]
			in[target] = append(in[target], memBulkInlink{source: u, anchor: anchor, terms: terms})
			links++
			anchorTerms += int64(len(terms))
			if len(terms) == 0 {
				continue
			}
			counts := anchorCounts[target]
			if counts == nil {
				counts = map[string]int64{}
				anchorCounts[target] = counts
			}
			for _, t := range terms {
				counts[t]++
			}
		}
		c := clusters[keys[i]]
		if c == nil {
			c = &memBulkCluster{key: keys[i], text: p.Text}
			clusters[keys[i]] = c
		}
		c.members = append(c.members, u) // urls are sorted
		if err := ctx.Err(); err != nil {
			return err
		}
	}

	ranker := ix.opts.Ranker
	var ranks map[string]*schema.PRState
	if ix.opts.PageRank != nil {
		var err error
		if ranks, err = memBulkPageRank(ctx, pages, urls, ix.opts.PageRank.Tolerance); err != nil {
			return err
		}
		if _, ok := ranker.(ranking.PageRankRanker); ok {
			ranker = memBulkRanker{ranks}
		}
	}
	list := make([]*memBulkCluster, 0, len(clusters))
	for _, c := range clusters {
		list = append(list, c)
	}
	slices.SortFunc(list, func(a, b *memBulkCluster) int { return strings.Compare(a.key, b.key) })
	stats := schema.Corpus{Pages: int64(len(urls)), Clusters: int64(len(list)), Links: links, Anchors: anchorTerms}

	return db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		// Each cluster's canonical, inbound count and members' ranks come
		// first: the pages' rows of the canonical table need them.
		heads, err := memBulkHeads(ctx, tx, ranker, list, in)
		if err != nil {
			return err
		}
		rows := make(map[string][]byte, len(urls))
		for i, c := range list {
			for j, m := range c.members {
				rows[m] = schema.EncodeRow(schema.CanonicalRow{Title: schema.ListTitle(pages[m].Title), Canonical: heads[i].canonical, InboundCount: heads[i].inbound, Rank: heads[i].ranks[j]})
			}
		}
		// While the page rows are passed and written, the term counts
		// are counted (on every core), then the postings gathered and
		// the clusters' states ranked; the postings are passed next, and
		// the tables that need the states last.
		var postings map[string][]memBulkPosting
		var cs *memBulkStates
		gathered, ranked := make(chan struct{}), make(chan error, 1)
		go func() {
			defer close(gathered)
			counts := make([]map[string]int64, len(list))
			words := make([]int64, len(list))
			for i, c := range list {
				counts[i], words[i] = schema.TermCounts(c.text)
			}
			go func() {
				var err error
				cs, err = memRankClusters(ctx, list, heads, in, anchorCounts, counts, words)
				ranked <- err
			}()
			postings = memBulkPostings(list, counts)
		}()
		err = memSetPageRows(ctx, pages, urls, keys, rows, in, anchorCounts, ranks, set)
		<-gathered
		err = errors.Join(err, <-ranked)
		if err == nil {
			err = memSetPostings(ctx, postings, memBulkAnchorPostings(list, cs.anchors), set)
		}
		if err != nil {
			return err
		}
		stats.Docs, stats.Words, stats.LastTs = cs.docs, cs.words, tx.StartTs()
		if err := memSetClusters(ctx, list, cs, set); err != nil {
			return err
		}
		if err := memSetSorted(schema.SitesTable, cs.sites, set); err != nil {
			return err
		}
		if err := set(schema.StatsTable, schema.CorpusRow, schema.CorpusCol, schema.EncodeCorpus(stats)); err != nil {
			return err
		}
		return memSetSorted(schema.TopTable, cs.top, set)
	})
}

// memBulkStates are the clusters' states of a bulk computation and what
// derives from them: each cluster's sorted terms and anchor term counts,
// the entries of the sites and top lists, and the corpus's BM25
// statistics.
type memBulkStates struct {
	states      []*schema.State
	terms       [][]string
	anchors     []map[string]int64
	sites, top  []memBulkCell
	docs, words int64
}

// memClusterHead is what the cluster observer derives first of a cluster's
// members: its canonical, the canonical's rank, its inbound count, and
// each member's rank (in the order of its members).
type memClusterHead struct {
	canonical     string
	best, inbound int64
	ranks         []int64
}

// memBulkHeads computes the head of each cluster of list, as the cluster
// observer would: the canonical by ranker, and the inbound count (of a
// cluster with duplicates, its number of distinct sources outside it).
func memBulkHeads(ctx context.Context, tx *framework.Txn, ranker ranking.Ranker, list []*memBulkCluster, in map[string][]memBulkInlink) ([]memClusterHead, error) {
	heads := make([]memClusterHead, len(list))
	for i, c := range list {
		h := &heads[i]
		h.ranks = make([]int64, len(c.members))
		for j, m := range c.members {
			n := int64(len(in[m]))
			r, err := ranker.Rank(ctx, tx, m, n)
			if err != nil {
				return nil, fmt.Errorf("webindex: ranking %s: %w", m, err)
			}
			h.ranks[j] = r
			if h.canonical == "" || ranking.Better(r, m, h.best, h.canonical) {
				h.best, h.canonical = r, m
			}
			h.inbound = n
		}
		if len(c.members) > 1 {
			outside := map[string]bool{}
			for _, m := range c.members {
				for _, l := range in[m] {
					if _, inside := slices.BinarySearch(c.members, l.source); !inside {
						outside[l.source] = true
					}
				}
			}
			h.inbound = int64(len(outside))
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return heads, nil
}

// memRankClusters computes the state of each cluster of list (by key), as
// the cluster observer would, from its head: its words and anchor terms
// besides; counts and words are the term counts of each, anchorCounts
// those of each URL's anchors.
func memRankClusters(ctx context.Context, list []*memBulkCluster, heads []memClusterHead, in map[string][]memBulkInlink, anchorCounts map[string]map[string]int64, counts []map[string]int64, words []int64) (*memBulkStates, error) {
	cs := &memBulkStates{states: make([]*schema.State, len(list)), terms: make([][]string, len(list)), anchors: make([]map[string]int64, len(list))}
	collect := schema.Setter(func(table string, row []byte, col framework.Column, value []byte) error {
		cell := memBulkCell{row: row, col: col, value: value}
		if table == schema.TopTable {
			cs.top = append(cs.top, cell)
		} else {
			cs.sites = append(cs.sites, cell)
		}
		return nil
	})
	for i, c := range list {
		canonical, best, inbound := heads[i].canonical, heads[i].best, heads[i].inbound
		anchors := anchorCounts[c.members[0]]
		if len(c.members) > 1 {
			// The anchor terms of a cluster with duplicates are
			// counted once per distinct source outside it.
			outside := map[string]map[string]bool{}
			for _, m := range c.members {
				for _, l := range in[m] {
					if _, inside := slices.BinarySearch(c.members, l.source); !inside {
						set := outside[l.source]
						if set == nil {
							set = map[string]bool{}
							outside[l.source] = set
						}
						for _, t := range l.terms {
							set[t] = true
						}
					}
				}
			}
			anchors = map[string]int64{}
			for _, set := range outside {
				for t := range set {
					anchors[t]++
				}
			}
		}
		next := &schema.State{Canonical: canonical, Inbound: inbound, Rank: best, Words: words[i]}
		if cs.terms[i] = schema.SortedTerms(counts[i]); len(cs.terms[i]) > 0 {
			cs.docs++
			cs.words += words[i]
			if len(anchors) > 0 {
				cs.anchors[i] = schema.Postable(anchors)
				next.AnchorLen = schema.AnchorSum(cs.anchors[i])
			}
		}
		cs.states[i] = next
		if err := schema.SetListEntries(collect, c.key, cs.states[i]); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// memBulkInlink is a link into a URL: its source, the value of its inlink
// cell (encoded anchors), and the distinct terms of its anchors.
type memBulkInlink struct {
	source, anchor string
	terms          []string
}

// memAnchorTermLists maps each outlink target of p to the distinct terms of
// its anchors, sorted.
func memAnchorTermLists(p *extract.Page) map[string][]string {
	out := map[string][]string{}
	for t, as := range schema.AnchorLists(p) {
		if len(as) == 0 {
			continue
		}
		out[t] = extract.Terms(strings.Join(as, "\n"))
	}
	return out
}

// memBulkCell is a cell of a bulk computation, held until its table's turn.
type memBulkCell struct {
	row   []byte
	col   framework.Column
	value []byte
}

// memSetClusters passes the clusters' rows, in key order: members, terms,
// anchor terms and state.
func memSetClusters(ctx context.Context, list []*memBulkCluster, cs *memBulkStates, set schema.SetFunc) error {
	terms, states := cs.terms, cs.states
	for i, c := range list {
		row := []byte(c.key)
		for _, m := range c.members {
			if err := set(schema.ClustersTable, row, framework.Column{Family: schema.MemberFamily, Qualifier: m}, nil); err != nil {
				return err
			}
		}
		if len(terms[i]) > 0 {
			if err := set(schema.ClustersTable, row, schema.ClusterTerms, schema.EncodeTerms(terms[i])); err != nil {
				return err
			}
		}
		if len(cs.anchors[i]) > 0 {
			if err := set(schema.ClustersTable, row, schema.ClusterAnchors, schema.EncodeTermCounts(cs.anchors[i])); err != nil {
				return err
			}
		}
		if err := set(schema.ClustersTable, row, schema.ClusterState, schema.EncodeState(states[i])); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// memSetPageRows passes the rows of the pages table in key order: those of
// the pages (document, summary, indexed copy, cluster, PageRank state if
// ranks is not nil, row of the canonical table) and of every link target, loaded or not (inlink cells,
// count and anchor term counts). urls are sorted, and keys[i] is the
// cluster of urls[i].
func memSetPageRows(ctx context.Context, pages map[string]*extract.Page, urls, keys []string, canonicalRows map[string][]byte, in map[string][]memBulkInlink, anchorCounts map[string]map[string]int64, ranks map[string]*schema.PRState, set schema.SetFunc) error {
	rows := slices.Clone(urls)
	for t := range in {
		if _, loaded := pages[t]; !loaded {
			rows = append(rows, t)
		}
	}
	slices.Sort(rows)
	next := 0 // the next page of urls
	for i, u := range rows {
		row := []byte(u)
		if next < len(urls) && urls[next] == u {
			p := pages[u]
			if err := set(schema.PagesTable, row, schema.Doc, schema.EncodeDoc(p)); err != nil {
				return err
			}
			if err := schema.SetListCells(schema.Setter(set), p); err != nil {
				return err
			}
			if err := set(schema.PagesTable, row, schema.Indexed, schema.EncodeDoc(&extract.Page{URL: u, Links: p.Links, MoreAnchors: p.MoreAnchors})); err != nil {
				return err
			}
			if err := set(schema.PagesTable, row, schema.ClusterOf, []byte(keys[next])); err != nil {
				return err
			}
			if err := set(schema.PagesTable, row, schema.RowCol, canonicalRows[u]); err != nil {
				return err
			}
			if ranks != nil {
				if err := memSetBulkPageRank(row, ranks[u], set); err != nil {
					return err
				}
			}
			next++
		}
		for _, l := range in[u] {
			if err := set(schema.PagesTable, row, framework.Column{Family: schema.InlinkFamily, Qualifier: l.source}, []byte(l.anchor)); err != nil {
				return err
			}
		}
		if n := len(in[u]); n > 0 {
			if err := set(schema.PagesTable, row, schema.InlinkCountCol, strconv.AppendInt(nil, int64(n), 10)); err != nil {
				return err
			}
		}
		if counts := anchorCounts[u]; len(counts) > 0 {
			if err := set(schema.PagesTable, row, schema.AnchorTermsCol, schema.EncodeTermCounts(counts)); err != nil {
				return err
			}
		}
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// memSetSorted passes cells of table in the order of their rows.
func memSetSorted(table string, cells []memBulkCell, set schema.SetFunc) error {
	slices.SortFunc(cells, func(a, b memBulkCell) int { return bytes.Compare(a.row, b.row) })
	for _, c := range cells {
		if err := set(table, c.row, c.col, c.value); err != nil {
			return err
		}
	}
	return nil
}

// memBulkPosting is a cluster's search posting under a term.
type memBulkPosting struct {
	cluster string
	tf      int64
}

// memBulkPostings are the postings of the clusters of list (by key), by
// term, each term's in cluster order; counts are their term counts.
func memBulkPostings(list []*memBulkCluster, counts []map[string]int64) map[string][]memBulkPosting {
	postings := map[string][]memBulkPosting{}
	for i, c := range list {
		for t, tf := range counts[i] {
			postings[t] = append(postings[t], memBulkPosting{cluster: c.key, tf: tf})
		}
	}
	return postings
}

// memBulkAnchorPostings are the anchor postings of the clusters of list (by
// key), by term, each term's in cluster order; anchors are their anchor
// term counts.
func memBulkAnchorPostings(list []*memBulkCluster, anchors []map[string]int64) map[string][]memBulkPosting {
	postings := map[string][]memBulkPosting{}
	for i, c := range list {
		for t, n := range anchors[i] {
			postings[t] = append(postings[t], memBulkPosting{cluster: c.key, tf: n})
		}
	}
	return postings
}

// memSetPostings passes the text and anchor postings to set in the order of
// their cells: by term, then family, then cluster (each term's list is in
// cluster order). They are most of an index's cells; written in key
// order, the import's chunks of them cover disjoint key ranges, so the
// store takes each as it is instead of compacting overlapping ones
// together afterwards.
func memSetPostings(ctx context.Context, postings, anchorPostings map[string][]memBulkPosting, set schema.SetFunc) error {
	terms := make([]string, 0, len(postings))
	for t := range postings {
		terms = append(terms, t)
	}
	for t := range anchorPostings {
		if _, ok := postings[t]; !ok {
			terms = append(terms, t)
		}
	}
	slices.Sort(terms)
	for i, t := range terms {
		row := []byte(t)
		for _, p := range anchorPostings[t] {
			if err := set(schema.TermsTable, row, framework.Column{Family: schema.AnchorFamily, Qualifier: p.cluster}, schema.EncodePosting(p.tf)); err != nil {
				return err
			}
		}
		for _, p := range postings[t] {
			if err := set(schema.TermsTable, row, framework.Column{Family: schema.PostingFamily, Qualifier: p.cluster}, schema.EncodePosting(p.tf)); err != nil {
				return err
			}
		}
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// memBulkPageRank computes the PageRank state the observers would converge to
// for pages (urls: their sorted keys), for a bulk load: each page's
// outlinks to loaded pages, and the estimate x̂ of a Jacobi iteration
// x ← (1-α)·1 + α·Hᵀx run until its step, which is exactly the residual
// r = (1-α)·1 + α·Hᵀx̂ - x̂ of the estimate, is far below the tolerance
// everywhere. The estimate and that residual are stored together, so the
// identity the push observers keep holds from the start, no push is due,
// and later changes are corrected against it as if the pages had been
// loaded one by one.
func memBulkPageRank(ctx context.Context, pages map[string]*extract.Page, urls []string, tolerance float64) (map[string]*schema.PRState, error) {
	id := make(map[string]int, len(urls))
	for i, u := range urls {
		id[u] = i
	}
	out := make([][]int, len(urls))
	states := make(map[string]*schema.PRState, len(urls))
	for i, u := range urls {
		var targets []string
		for t := range schema.Anchors(pages[u]) {
			if _, loaded := id[t]; loaded && t != u {
				targets = append(targets, t)
			}
		}
		slices.Sort(targets)
		if len(targets) > schema.MaxPROutlinks {
			targets = targets[:schema.MaxPROutlinks]
		}
		for _, t := range targets {
			out[i] = append(out[i], id[t])
		}
		states[u] = &schema.PRState{Loaded: true, Out: targets}
	}
	x := make([]float64, len(urls))
	next := make([]float64, len(urls))
	for i := range x {
		x[i] = 1 - ranking.Damping
	}
	// The step shrinks by α per iteration; stop well inside ε, so that a
	// bulk-loaded index is as exact as a settled incremental one can be.
	limit := tolerance / 1024
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i := range next {
			next[i] = 1 - ranking.Damping
		}
		for i, ts := range out {
			if len(ts) == 0 {
				continue
			}
			share := ranking.Damping * x[i] / float64(len(ts))
			for _, t := range ts {
				next[t] += share
			}
		}
		var step float64
		for i := range x {
			step = max(step, math.Abs(next[i]-x[i]))
		}
		if step <= limit {
			for i, u := range urls {
				states[u].Rank, states[u].Residual = x[i], next[i]-x[i]
			}
			return states, nil
		}
		x, next = next, x
	}
}

// memSetBulkPageRank passes the PageRank cells of a bulk-loaded page's row to
// set: its state st, and the mark that its sources count it as loaded.
func memSetBulkPageRank(row []byte, st *schema.PRState, set schema.SetFunc) error {
	if err := set(schema.PagesTable, row, schema.PRStateCol, schema.EncodePRState(st)); err != nil {
		return err
	}
	return set(schema.PagesTable, row, schema.PRAnnounced, nil)
}

// memBulkRanker ranks by bulk-computed PageRank estimates where the index's
// Ranker is PageRankRanker: the import is not readable while it is
// computed.
type memBulkRanker struct {
	states map[string]*schema.PRState
}

func (r memBulkRanker) Rank(_ context.Context, _ *framework.Txn, url string, _ int64) (int64, error) {
	return int64(math.Round(r.states[url].Rank * schema.PageRankScale)), nil
}
