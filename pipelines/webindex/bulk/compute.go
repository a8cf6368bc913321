package bulk

import (
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"log/slog"
	"runtime"
	"strings"
	"sync"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/batchpipe"
	"github.com/trickle-dev/trickle/internal/extsort"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// Config is what a bulk computation needs of the load's options and
// of the index's.
type Config struct {
	// MemoryBytes, TempDir, Logger and ExpectedPages are the load's
	// (BulkOptions).
	MemoryBytes   int64
	TempDir       string
	Logger        *slog.Logger
	ExpectedPages int64
	// Ranker chooses the canonicals, as the cluster observer's does.
	Ranker ranking.Ranker
	// PageRank computes every page's PageRank state, settled within
	// Tolerance (Options.PageRank).
	PageRank  bool
	Tolerance float64
}

// Result is what a bulk computation did: the pages it computed, and
// the sorted runs it spilled to disk and their size.
type Result struct {
	Pages        int64
	Spills       int
	SpilledBytes int64
}

// Compute computes the index of pages (in URL order) as the observers
// leave it once every page is loaded and no notification is pending, and
// passes every cell to set: what PutPage writes (document, summary), what
// the page observer writes (indexed copy, cluster, inlink cells on the
// targets' rows, membership), the inlink counts (folded: no queued
// changes), and what the cluster observer writes (state, terms,
// postings, top entry), and with Options.PageRank each page's PageRank
// state, settled. The values are made by the encoders the observers use.
// It returns the number of pages, and adds what it spilled to stats.
//
// Nothing proportional to the corpus is held in memory but a key per
// cluster and, with PageRank, two numbers per page: the pages are
// scanned once, as they come, into a file of their own rows' cells and
// into sorters (extsort) of their links by target and of their clusters'
// members; the links sorted by target give each page its inlinks and
// each cluster its members' inlinks; the clusters sorted by key give
// their states, and the postings and canonical rows, sorted in turn.
//
// It passes the cells table by table, each table's rows in order (the
// clusters, the pages, the terms, the sites, the stats, the top list):
// the import's chunks then cover disjoint key ranges, and the store
// links each in as it is, while the next is computed.
func Compute(ctx context.Context, db *framework.DB, pages iter.Seq2[*extract.Page, error], cfg *Config, set schema.SetFunc) (res Result, err error) {
	j, err := newBulkJob(cfg)
	if err != nil {
		return res, err
	}
	defer func() {
		res.Pages = j.pages
		res.Spills, res.SpilledBytes = j.spills()
		if cerr := j.close(); err == nil {
			err = cerr
		}
	}()
	sc, err := j.scan(ctx, pages)
	if err != nil {
		return res, err
	}
	if err := j.invert(ctx, sc); err != nil {
		return res, err
	}
	if cfg.PageRank {
		if j.pr, err = j.pageRank(ctx, sc.outlinks, cfg.Tolerance); err != nil {
			return res, err
		}
	}
	return res, db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		out, err := j.rankClusters(ctx, tx, sc.clusters, set)
		if err != nil {
			return err
		}
		if err := j.setPageRows(ctx, sc, out.rows, set); err != nil {
			return err
		}
		if err := j.setTerms(ctx, out.postings, set); err != nil {
			return err
		}
		if err := setSortedCells(ctx, schema.SitesTable, out.sites, set); err != nil {
			return err
		}
		c := schema.Corpus{Pages: j.pages, Clusters: j.clusters, Links: j.links, Anchors: j.anchorTerms, Docs: j.docs, Words: j.words, LastTs: tx.StartTs()}
		if err := set(schema.StatsTable, schema.CorpusRow, schema.CorpusCol, schema.EncodeCorpus(c)); err != nil {
			return err
		}
		return setSortedCells(ctx, schema.TopTable, out.top, set)
	})
}

// bulkScan is what scanning the pages leaves: the pages' own cells and
// their index (URL and cluster, by ordinal), both in URL order, and the
// sorters of links by target, of members by cluster and, for PageRank, of
// links to loaded pages by source.
type bulkScan struct {
	cells, index      string // seqWriter files
	inlinks, clusters *extsort.Sorter
	outlinks          *extsort.Sorter // nil without PageRank
}

// scannedPage is what a page contributes, computed on every core.
type scannedPage struct {
	p     *extract.Page
	key   string
	cells []byte // its row's own cells, encoded
	links []scannedLink
}

// scannedLink is a link of a page: its target, the value of its inlink
// cell (encoded anchors), and the distinct terms of its anchors.
type scannedLink struct {
	target, anchor string
	terms          []string
}

// scanBatch is how many pages are scanned at a time, on every core.
const scanBatch = 256

// scan reads the pages, in URL order, into the files and sorters of a
// bulkScan. Each page's ordinal is its position.
func (j *bulkJob) scan(ctx context.Context, pages iter.Seq2[*extract.Page, error]) (*bulkScan, error) {
	j.prog.start("scanning pages", j.expected)
	sc := &bulkScan{}
	var err error
	if sc.inlinks, err = j.sorter(shareInlinks); err != nil {
		return nil, err
	}
	if sc.clusters, err = j.sorter(shareClusters); err != nil {
		return nil, err
	}
	cells, err := j.createSeq("cells")
	if err != nil {
		return nil, err
	}
	defer cells.close()
	index, err := j.createSeq("index")
	if err != nil {
		return nil, err
	}
	defer index.close()
	sc.cells, sc.index = cells.path, index.path
	var key, val []byte
	// Reading the pages, scanning a batch on every core and adding the
	// last to the files and sorters overlap.
	produce := func(ctx context.Context, send func([]scannedPage) bool) error {
		var last string
		var n int
		batch := make([]scannedPage, 0, scanBatch)
		for p, err := range pages {
			if err != nil {
				return err
			}
			if p == nil {
				return fmt.Errorf("webindex: bulk load: a nil page after %q", last)
			}
			if p.URL <= last && n > 0 {
				return fmt.Errorf("webindex: bulk load: page %q after %q: pages must come in URL order, each once", p.URL, last)
			}
			if norm, err := extract.Normalize(p.URL); err != nil || norm != p.URL {
				return fmt.Errorf("webindex: bulk load: URL %q is not normalized", p.URL)
			}
			last = p.URL
			n++
			if batch = append(batch, scannedPage{p: p}); len(batch) == scanBatch {
				if !send(batch) {
					return ctx.Err()
				}
				batch = make([]scannedPage, 0, scanBatch)
			}
		}
		if len(batch) > 0 && !send(batch) {
			return ctx.Err()
		}
		return nil
	}
	work := func(batch []scannedPage) {
		parallel(len(batch), func(i int) { batch[i].scan() })
	}
	finish := func(batch []scannedPage) error {
		for i := range batch {
			s := &batch[i]
			id := uint32(j.pages)
			j.pages++
			if err := cells.add(s.cells); err != nil {
				return err
			}
			val = schema.AppendString(schema.AppendString(val[:0], s.p.URL), s.key)
			if err := index.add(val); err != nil {
				return err
			}
			key = append(append(append(append(key[:0], s.key...), 0), s.p.URL...), 0, clusterMember)
			val = schema.AppendString(schema.AppendString(appendID(val[:0], id), s.p.Title), s.p.Text)
			if err := sc.clusters.Add(key, val); err != nil {
				return err
			}
			for _, l := range s.links {
				key = append(append(append(key[:0], l.target...), 0), s.p.URL...)
				val = appendStrings(schema.AppendString(appendID(val[:0], id), l.anchor), l.terms)
				if err := sc.inlinks.Add(key, val); err != nil {
					return err
				}
				j.links++
				j.anchorTerms += int64(len(l.terms))
			}
			batch[i] = scannedPage{}
		}
		j.prog.add(int64(len(batch)))
		return nil
	}
	if err := batchpipe.Run(ctx, produce, work, finish); err != nil {
		return nil, err
	}
	if err := cells.close(); err != nil {
		return nil, err
	}
	if err := index.close(); err != nil {
		return nil, err
	}
	return sc, nil
}

// Tags of a cluster sorter's records, after the cluster key and the
// member's URL.
const (
	clusterMember  = 'm' // the member itself: ordinal, title, text
	clusterInlinks = 'i' // its inlinks: count, then each one's source and terms
)

// scan computes what s.p contributes: its cluster, its row's own cells
// (document, list cells, indexed copy, cluster) and its links.
func (s *scannedPage) scan() {
	p := s.p
	s.key = schema.ClusterKey(p)
	var b []byte
	b = schema.AppendString(b, p.URL)
	add := func(col framework.Column, value []byte) {
		b = schema.AppendString(schema.AppendString(b, col.Family), col.Qualifier)
		b = schema.AppendString(b, string(value))
	}
	add(schema.Doc, schema.EncodeDoc(p))
	schema.SetListCells(schema.Setter(func(_ string, _ []byte, col framework.Column, value []byte) error {
		add(col, value)
		return nil
	}), p)
	add(schema.Indexed, schema.EncodeDoc(&extract.Page{URL: p.URL, Links: p.Links, MoreAnchors: p.MoreAnchors}))
	add(schema.ClusterOf, []byte(s.key))
	s.cells = b
	lists := schema.AnchorLists(p)
	s.links = make([]scannedLink, 0, len(lists))
	for t, as := range lists {
		l := scannedLink{target: t, anchor: string(schema.EncodeAnchors(as))}
		if len(as) > 0 {
			l.terms = anchorTermLists(as)
		}
		s.links = append(s.links, l)
	}
}

// anchorTermLists are the distinct terms of a link's anchors, sorted.
func anchorTermLists(anchors []string) []string {
	return extract.Terms(strings.Join(anchors, "\n"))
}

// invert reads the inlinks by target, with the pages' index, and adds
// each loaded page's inlinks to its cluster's members and, for PageRank,
// each link to a loaded page to the outlinks by source.
func (j *bulkJob) invert(ctx context.Context, sc *bulkScan) error {
	if err := sc.inlinks.Finish(ctx); err != nil {
		return err
	}
	j.prog.start("inverting links", sc.inlinks.Len())
	if j.cfg.PageRank {
		var err error
		if sc.outlinks, err = j.sorter(shareOutlinks); err != nil {
			return err
		}
	}
	index, err := openSeq(sc.index)
	if err != nil {
		return err
	}
	defer index.close()
	// The index's page at or after the target, by ordinal.
	var pageURL, pageKey string
	var pageID uint32
	id, ended := int64(-1), false
	seek := func(target string) (loaded bool, err error) {
		for !ended && pageURL < target {
			b, ok := index.next()
			if !ok {
				ended = true
				break
			}
			d := schema.NewDecoder(b)
			pageURL, pageKey = d.String(), d.String()
			if err := d.Err(); err != nil {
				return false, err
			}
			id++
		}
		pageID = uint32(id)
		return !ended && pageURL == target, index.err
	}
	var target []byte
	var loaded bool
	var group []byte // the clusterInlinks value being built
	var n uint64
	var key, val []byte
	flush := func() error {
		if n == 0 || !loaded {
			return nil // not a loaded page: its inlinks are only cells
		}
		key = append(append(append(append(key[:0], pageKey...), 0), target...), 0, clusterInlinks)
		val = append(binary.AppendUvarint(val[:0], n), group...)
		return sc.clusters.Add(key, val)
	}
	it := sc.inlinks.Iter(ctx)
	defer it.Close()
	for it.Next() {
		r := it.Record()
		t, source := splitKey(r.Key)
		if string(t) != string(target) {
			if err := flush(); err != nil {
				return err
			}
			target, group, n = append(target[:0], t...), group[:0], 0
			var err error
			if loaded, err = seek(string(target)); err != nil {
				return err
			}
		}
		sid := binary.BigEndian.Uint32(r.Value)
		d := schema.NewDecoder(r.Value[4:])
		_ = d.String() // the anchors
		terms := d.Strings()
		if d.Err() != nil {
			return d.Err()
		}
		n++
		group = appendStrings(schema.AppendString(group, string(source)), terms)
		if sc.outlinks != nil && loaded && sid != pageID {
			key = append(appendID(key[:0], sid), target...)
			if err := sc.outlinks.Add(key, appendID(val[:0], pageID)); err != nil {
				return err
			}
		}
		j.prog.add(1)
	}
	if err := it.Err(); err != nil {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	return sc.clusters.Finish(ctx)
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
