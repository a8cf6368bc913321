package webindex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// setFunc receives the cells of a bulk-computed index.
type setFunc func(table string, row []byte, col framework.Column, value []byte) error

// bulkCluster is one duplicate cluster of a bulk computation.
type bulkCluster struct {
	key     string
	members []string // sorted
	text    string
}

// computeBulk computes the index of pages as the observers leave it once
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
func (ix *Index) computeBulk(ctx context.Context, db *framework.DB, pages map[string]*extract.Page, set setFunc) error {
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
	parallel(len(urls), func(i int) {
		keys[i] = clusterKey(pages[urls[i]])
		linkTerms[i] = anchorTermLists(pages[urls[i]])
	})

	clusters := map[string]*bulkCluster{}
	in := map[string][]bulkInlink{}               // each URL's inlinks, by source (urls are sorted)
	anchorCounts := map[string]map[string]int64{} // each URL's anchor term counts
	var links, anchorTerms int64
	for i, u := range urls {
		p := pages[u]
		for target, anchor := range anchors(p) {
			terms := linkTerms[i][target]
			in[target] = append(in[target], bulkInlink{source: u, anchor: anchor, terms: terms})
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
			c = &bulkCluster{key: keys[i], text: p.Text}
			clusters[keys[i]] = c
		}
		c.members = append(c.members, u) // urls are sorted
		if err := ctx.Err(); err != nil {
			return err
		}
	}

	ranker := ix.opts.Ranker
	var ranks map[string]*prState
	if ix.opts.PageRank != nil {
		var err error
		if ranks, err = bulkPageRank(ctx, pages, urls, ix.opts.PageRank.Tolerance); err != nil {
			return err
		}
		if _, ok := ranker.(PageRankRanker); ok {
			ranker = bulkRanker{ranks}
		}
	}
	list := make([]*bulkCluster, 0, len(clusters))
	for _, c := range clusters {
		list = append(list, c)
	}
	slices.SortFunc(list, func(a, b *bulkCluster) int { return strings.Compare(a.key, b.key) })
	stats := corpus{Pages: int64(len(urls)), Clusters: int64(len(list)), Links: links, Anchors: anchorTerms}

	return db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		// Each cluster's canonical, inbound count and members' ranks come
		// first: the pages' rows of the canonical table need them.
		heads, err := bulkHeads(ctx, tx, ranker, list, in)
		if err != nil {
			return err
		}
		rows := make(map[string][]byte, len(urls))
		for i, c := range list {
			for j, m := range c.members {
				rows[m] = encodeRow(CanonicalRow{Title: listTitle(pages[m].Title), Canonical: heads[i].canonical, InboundCount: heads[i].inbound, Rank: heads[i].ranks[j]})
			}
		}
		// While the page rows are passed and written, the term counts
		// are counted (on every core), then the postings gathered and
		// the clusters' states ranked; the postings are passed next, and
		// the tables that need the states last.
		var postings map[string][]bulkPosting
		var cs *bulkStates
		gathered, ranked := make(chan struct{}), make(chan error, 1)
		go func() {
			defer close(gathered)
			counts := make([]map[string]int64, len(list))
			words := make([]int64, len(list))
			parallel(len(list), func(i int) { counts[i], words[i] = termCounts(list[i].text) })
			go func() {
				var err error
				cs, err = rankClusters(ctx, list, heads, in, anchorCounts, counts, words)
				ranked <- err
			}()
			postings = bulkPostings(list, counts)
		}()
		err = setPageRows(ctx, pages, urls, keys, rows, in, anchorCounts, ranks, set)
		<-gathered
		err = errors.Join(err, <-ranked)
		if err == nil {
			err = setPostings(ctx, postings, bulkAnchorPostings(list, cs.anchors), set)
		}
		if err != nil {
			return err
		}
		stats.Docs, stats.Words, stats.LastTs = cs.docs, cs.words, tx.StartTs()
		if err := setClusters(ctx, list, cs, set); err != nil {
			return err
		}
		if err := setSorted(SitesTable, cs.sites, set); err != nil {
			return err
		}
		if err := set(StatsTable, corpusRow, corpusCol, encodeCorpus(stats)); err != nil {
			return err
		}
		return setSorted(TopTable, cs.top, set)
	})
}

// bulkStates are the clusters' states of a bulk computation and what
// derives from them: each cluster's sorted terms and anchor term counts,
// the entries of the sites and top lists, and the corpus's BM25
// statistics.
type bulkStates struct {
	states      []*state
	terms       [][]string
	anchors     []map[string]int64
	sites, top  []bulkCell
	docs, words int64
}

// clusterHead is what the cluster observer derives first of a cluster's
// members: its canonical, the canonical's rank, its inbound count, and
// each member's rank (in the order of its members).
type clusterHead struct {
	canonical     string
	best, inbound int64
	ranks         []int64
}

// bulkHeads computes the head of each cluster of list, as the cluster
// observer would: the canonical by ranker, and the inbound count (of a
// cluster with duplicates, its number of distinct sources outside it).
func bulkHeads(ctx context.Context, tx *framework.Txn, ranker Ranker, list []*bulkCluster, in map[string][]bulkInlink) ([]clusterHead, error) {
	heads := make([]clusterHead, len(list))
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
			if h.canonical == "" || better(r, m, h.best, h.canonical) {
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

// rankClusters computes the state of each cluster of list (by key), as
// the cluster observer would, from its head: its words and anchor terms
// besides; counts and words are the term counts of each, anchorCounts
// those of each URL's anchors.
func rankClusters(ctx context.Context, list []*bulkCluster, heads []clusterHead, in map[string][]bulkInlink, anchorCounts map[string]map[string]int64, counts []map[string]int64, words []int64) (*bulkStates, error) {
	cs := &bulkStates{states: make([]*state, len(list)), terms: make([][]string, len(list)), anchors: make([]map[string]int64, len(list))}
	collect := setter(func(table string, row []byte, col framework.Column, value []byte) error {
		cell := bulkCell{row: row, col: col, value: value}
		if table == TopTable {
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
		next := &state{Canonical: canonical, Inbound: inbound, Rank: best, Words: words[i]}
		if cs.terms[i] = sortedTerms(counts[i]); len(cs.terms[i]) > 0 {
			cs.docs++
			cs.words += words[i]
			if len(anchors) > 0 {
				cs.anchors[i] = postable(anchors)
				next.AnchorLen = anchorSum(cs.anchors[i])
			}
		}
		cs.states[i] = next
		if err := setListEntries(collect, c.key, cs.states[i]); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// bulkInlink is a link into a URL: its source, the value of its inlink
// cell (encoded anchors), and the distinct terms of its anchors.
type bulkInlink struct {
	source, anchor string
	terms          []string
}

// anchorTermLists maps each outlink target of p to the distinct terms of
// its anchors, sorted.
func anchorTermLists(p *extract.Page) map[string][]string {
	out := map[string][]string{}
	for t, as := range anchorLists(p) {
		if len(as) == 0 {
			continue
		}
		out[t] = extract.Terms(strings.Join(as, "\n"))
	}
	return out
}

// bulkCell is a cell of a bulk computation, held until its table's turn.
type bulkCell struct {
	row   []byte
	col   framework.Column
	value []byte
}

// setClusters passes the clusters' rows, in key order: members, terms,
// anchor terms and state.
func setClusters(ctx context.Context, list []*bulkCluster, cs *bulkStates, set setFunc) error {
	terms, states := cs.terms, cs.states
	for i, c := range list {
		row := []byte(c.key)
		for _, m := range c.members {
			if err := set(ClustersTable, row, framework.Column{Family: memberFamily, Qualifier: m}, nil); err != nil {
				return err
			}
		}
		if len(terms[i]) > 0 {
			if err := set(ClustersTable, row, clusterTerms, encodeTerms(terms[i])); err != nil {
				return err
			}
		}
		if len(cs.anchors[i]) > 0 {
			if err := set(ClustersTable, row, clusterAnchors, encodeTermCounts(cs.anchors[i])); err != nil {
				return err
			}
		}
		if err := set(ClustersTable, row, clusterState, encodeState(states[i])); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// setPageRows passes the rows of the pages table in key order: those of
// the pages (document, summary, indexed copy, cluster, PageRank state if
// ranks is not nil, row of the canonical table) and of every link target, loaded or not (inlink cells,
// count and anchor term counts). urls are sorted, and keys[i] is the
// cluster of urls[i].
func setPageRows(ctx context.Context, pages map[string]*extract.Page, urls, keys []string, canonicalRows map[string][]byte, in map[string][]bulkInlink, anchorCounts map[string]map[string]int64, ranks map[string]*prState, set setFunc) error {
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
			if err := set(PagesTable, row, Doc, encodeDoc(p)); err != nil {
				return err
			}
			if err := setListCells(setter(set), p); err != nil {
				return err
			}
			if err := set(PagesTable, row, indexed, encodeDoc(&extract.Page{URL: u, Links: p.Links, MoreAnchors: p.MoreAnchors})); err != nil {
				return err
			}
			if err := set(PagesTable, row, clusterOf, []byte(keys[next])); err != nil {
				return err
			}
			if err := set(PagesTable, row, rowCol, canonicalRows[u]); err != nil {
				return err
			}
			if ranks != nil {
				if err := setBulkPageRank(row, ranks[u], set); err != nil {
					return err
				}
			}
			next++
		}
		for _, l := range in[u] {
			if err := set(PagesTable, row, framework.Column{Family: inlinkFamily, Qualifier: l.source}, []byte(l.anchor)); err != nil {
				return err
			}
		}
		if n := len(in[u]); n > 0 {
			if err := set(PagesTable, row, inlinkCount, strconv.AppendInt(nil, int64(n), 10)); err != nil {
				return err
			}
		}
		if counts := anchorCounts[u]; len(counts) > 0 {
			if err := set(PagesTable, row, anchorTermsCol, encodeTermCounts(counts)); err != nil {
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

// setSorted passes cells of table in the order of their rows.
func setSorted(table string, cells []bulkCell, set setFunc) error {
	slices.SortFunc(cells, func(a, b bulkCell) int { return bytes.Compare(a.row, b.row) })
	for _, c := range cells {
		if err := set(table, c.row, c.col, c.value); err != nil {
			return err
		}
	}
	return nil
}

// bulkPosting is a cluster's search posting under a term.
type bulkPosting struct {
	cluster string
	tf      int64
}

// bulkPostings are the postings of the clusters of list (by key), by
// term, each term's in cluster order; counts are their term counts.
func bulkPostings(list []*bulkCluster, counts []map[string]int64) map[string][]bulkPosting {
	postings := map[string][]bulkPosting{}
	for i, c := range list {
		for t, tf := range counts[i] {
			postings[t] = append(postings[t], bulkPosting{cluster: c.key, tf: tf})
		}
	}
	return postings
}

// bulkAnchorPostings are the anchor postings of the clusters of list (by
// key), by term, each term's in cluster order; anchors are their anchor
// term counts.
func bulkAnchorPostings(list []*bulkCluster, anchors []map[string]int64) map[string][]bulkPosting {
	postings := map[string][]bulkPosting{}
	for i, c := range list {
		for t, n := range anchors[i] {
			postings[t] = append(postings[t], bulkPosting{cluster: c.key, tf: n})
		}
	}
	return postings
}

// setPostings passes the text and anchor postings to set in the order of
// their cells: by term, then family, then cluster (each term's list is in
// cluster order). They are most of an index's cells; written in key
// order, the import's chunks of them cover disjoint key ranges, so the
// store takes each as it is instead of compacting overlapping ones
// together afterwards.
func setPostings(ctx context.Context, postings, anchorPostings map[string][]bulkPosting, set setFunc) error {
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
			if err := set(TermsTable, row, framework.Column{Family: anchorFamily, Qualifier: p.cluster}, encodePosting(p.tf)); err != nil {
				return err
			}
		}
		for _, p := range postings[t] {
			if err := set(TermsTable, row, framework.Column{Family: postingFamily, Qualifier: p.cluster}, encodePosting(p.tf)); err != nil {
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

// parallel calls f(i) for every i below n, on as many goroutines as there
// are cores.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				f(i)
			}
		})
	}
	wg.Wait()
}
