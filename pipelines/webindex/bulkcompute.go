package webindex

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
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
func (ix *Index) computeBulk(ctx context.Context, db *framework.DB, pages map[string]*extract.Page, set setFunc) error {
	urls := make([]string, 0, len(pages))
	for u := range pages {
		urls = append(urls, u)
	}
	slices.Sort(urls)

	// Cluster keys hash whole texts: the costliest per-page step but
	// term extraction, so it runs on every core.
	keys := make([]string, len(urls))
	parallel(len(urls), func(i int) { keys[i] = clusterKey(pages[urls[i]]) })

	clusters := map[string]*bulkCluster{}
	inlinkCounts := map[string]int64{}
	for i, u := range urls {
		p := pages[u]
		row := []byte(u)
		if err := set(PagesTable, row, Doc, encodeDoc(p)); err != nil {
			return err
		}
		if err := setListCells(setter(set), p); err != nil {
			return err
		}
		if err := set(PagesTable, row, indexed, encodeDoc(&extract.Page{URL: u, Links: p.Links, MoreAnchors: p.MoreAnchors})); err != nil {
			return err
		}
		if err := set(PagesTable, row, clusterOf, []byte(keys[i])); err != nil {
			return err
		}
		for target, anchor := range anchors(p) {
			if err := set(PagesTable, []byte(target), framework.Column{Family: inlinkFamily, Qualifier: u}, []byte(anchor)); err != nil {
				return err
			}
			inlinkCounts[target]++
		}
		c := clusters[keys[i]]
		if c == nil {
			c = &bulkCluster{key: keys[i], text: p.Text}
			clusters[keys[i]] = c
		}
		c.members = append(c.members, u) // urls are sorted
		if err := set(ClustersTable, []byte(keys[i]), framework.Column{Family: memberFamily, Qualifier: u}, nil); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	for target, n := range inlinkCounts {
		if err := set(PagesTable, []byte(target), inlinkCount, strconv.AppendInt(nil, n, 10)); err != nil {
			return err
		}
	}

	// The sources linking into each page of a cluster with duplicates:
	// their inbound count is the number of distinct sources outside.
	sources := map[string][]string{}
	for _, c := range clusters {
		if len(c.members) > 1 {
			for _, m := range c.members {
				sources[m] = nil
			}
		}
	}
	for _, u := range urls {
		for _, l := range pages[u].Links {
			if s, ok := sources[l.Target]; ok {
				sources[l.Target] = append(s, u)
			}
		}
	}

	list := make([]*bulkCluster, 0, len(clusters))
	for _, c := range clusters {
		list = append(list, c)
	}
	slices.SortFunc(list, func(a, b *bulkCluster) int { return cmpString(a.key, b.key) })
	counts := make([]map[string]int64, len(list))
	words := make([]int64, len(list))
	parallel(len(list), func(i int) { counts[i], words[i] = termCounts(list[i].text) })
	stats := corpus{Pages: int64(len(urls)), Clusters: int64(len(list))}
	for _, u := range urls {
		stats.Links += int64(len(anchors(pages[u])))
	}

	ranker := ix.opts.Ranker
	if ix.opts.PageRank != nil {
		states, err := bulkPageRank(ctx, pages, urls, ix.opts.PageRank.Tolerance)
		if err != nil {
			return err
		}
		if err := setBulkPageRank(urls, states, set); err != nil {
			return err
		}
		if _, ok := ranker.(PageRankRanker); ok {
			ranker = bulkRanker{states}
		}
	}

	return db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		postings := map[string][]bulkPosting{} // by term, in cluster order
		for i, c := range list {
			var canonical string
			var best, inbound int64
			for _, m := range c.members {
				n := inlinkCounts[m]
				r, err := ranker.Rank(ctx, tx, m, n)
				if err != nil {
					return fmt.Errorf("webindex: ranking %s: %w", m, err)
				}
				if canonical == "" || better(r, m, best, canonical) {
					best, canonical = r, m
				}
				inbound = n
			}
			if len(c.members) > 1 {
				outside := map[string]bool{}
				for _, m := range c.members {
					for _, s := range sources[m] {
						if _, inside := slices.BinarySearch(c.members, s); !inside {
							outside[s] = true
						}
					}
				}
				inbound = int64(len(outside))
			}
			row := []byte(c.key)
			if terms := sortedTerms(counts[i]); len(terms) > 0 {
				if err := set(ClustersTable, row, clusterTerms, encodeTerms(terms)); err != nil {
					return err
				}
				for _, t := range terms {
					postings[t] = append(postings[t], bulkPosting{cluster: c.key, tf: counts[i][t]})
				}
				stats.Docs++
				stats.Words += words[i]
			}
			s := &state{Canonical: canonical, Inbound: inbound, Rank: best, Words: words[i]}
			if err := setListEntries(setter(set), c.key, s); err != nil {
				return err
			}
			if err := set(ClustersTable, row, clusterState, encodeState(s)); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		stats.LastTs = tx.StartTs()
		if err := set(StatsTable, corpusRow, corpusCol, encodeCorpus(stats)); err != nil {
			return err
		}
		return setPostings(ctx, postings, set)
	})
}

// bulkPosting is a cluster's search posting under a term.
type bulkPosting struct {
	cluster string
	tf      int64
}

// setPostings passes the postings to set in the order of their cells:
// by term, then cluster (each term's list is in cluster order). They are
// most of an index's cells; written in key order, the import's chunks of
// them cover disjoint key ranges, so the store takes each as it is
// instead of compacting overlapping ones together afterwards.
func setPostings(ctx context.Context, postings map[string][]bulkPosting, set setFunc) error {
	terms := make([]string, 0, len(postings))
	for t := range postings {
		terms = append(terms, t)
	}
	slices.Sort(terms)
	for i, t := range terms {
		row := []byte(t)
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

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
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
