package webindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/combine"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// StatsTable holds the corpus statistics (one row, corpusRow): what the
// index overview shows and what BM25 normalizes by.
const StatsTable = "stats"

var (
	corpusRow = []byte("corpus")
	// corpusCol holds the encoded corpus statistics.
	corpusCol = framework.Column{Family: "stat", Qualifier: "corpus"}
)

// Every page and cluster changes the corpus statistics: the corpus row
// would be a collision hot spot if updated in place. Changes are queued
// instead (one distinct cell per change) and folded by a combine.Queue.
//
// Document frequencies are kept by no state at all: a term's is the number
// of postings in its row of TermsTable, which a search counts in a first
// pass over the query terms' rows. Keeping them as folded counts cost a
// queued cell per term and cluster, and folds that stepped over every
// deleted queued cell: it doubled the cost of indexing a page.
var corpusQueue = mustQueue(combine.Config{Name: "webindex-corpus", Table: StatsTable, Value: corpusCol, Combine: combineCorpus})

// registerQueues adds the observer folding the queued corpus statistics
// (webindex-corpus, weak, stats/webindex-corpus.q).
func registerQueues(reg *framework.Registry) error {
	return corpusQueue.Register(reg)
}

func mustQueue(cfg combine.Config) *combine.Queue {
	q, err := combine.New(cfg)
	if err != nil {
		panic(err) // the configs above are complete
	}
	return q
}

// corpus is the statistics of the whole index.
type corpus struct {
	// Pages is the number of indexed pages, Links the number of distinct
	// (source, target) links out of them.
	Pages, Links int64
	// Clusters is the number of duplicate clusters; Docs the number of
	// them with text (BM25's N), Words the words of their texts. Anchors
	// is the number of distinct anchor terms of every link out of the
	// pages: the mean anchor field length BM25F normalizes by is
	// Anchors/Docs. (It counts the anchors of links to pages not loaded,
	// or within a cluster, too, so that it changes with a page's own
	// links, queued by the page observer, and never with a cluster's
	// recompute: the anchor field of a popular page changes with every
	// link to it.)
	Clusters, Docs, Words, Anchors int64
	// LastTs is the timestamp of the latest indexing of a page (or of the
	// bulk load): a maximum, not a sum.
	LastTs uint64
}

// Corpus statistics encodings: noAnchorsCorpusVersion had no Anchors.
const (
	noAnchorsCorpusVersion = 1
	corpusVersion          = 2
)

// encodeCorpus encodes c; in a queued update the counts are deltas
// (zigzag varints, as the value itself).
func encodeCorpus(c corpus) []byte {
	b := []byte{corpusVersion}
	for _, v := range []int64{c.Pages, c.Links, c.Clusters, c.Docs, c.Words, c.Anchors} {
		b = binary.AppendVarint(b, v)
	}
	return binary.AppendUvarint(b, c.LastTs)
}

func decodeCorpus(b []byte) (corpus, error) {
	if len(b) == 0 || (b[0] != corpusVersion && b[0] != noAnchorsCorpusVersion) {
		return corpus{}, fmt.Errorf("%w: corpus statistics have unknown version", ErrCorrupt)
	}
	d := newDecoder(b[1:])
	var c corpus
	for _, p := range []*int64{&c.Pages, &c.Links, &c.Clusters, &c.Docs, &c.Words} {
		*p = d.Varint()
	}
	if b[0] == corpusVersion {
		c.Anchors = d.Varint()
	}
	c.LastTs = d.Uvarint()
	if d.Err() != nil || d.Len() != 0 {
		return corpus{}, fmt.Errorf("%w: corpus statistics of %d bytes are truncated or have trailing bytes", ErrCorrupt, len(b))
	}
	return c, nil
}

// combineCorpus adds queued deltas to the corpus statistics.
func combineCorpus(cur []byte, updates [][]byte) ([]byte, error) {
	var c corpus
	if cur != nil {
		var err error
		if c, err = decodeCorpus(cur); err != nil {
			return nil, err
		}
	}
	for _, u := range updates {
		d, err := decodeCorpus(u)
		if err != nil {
			return nil, err
		}
		c.Pages += d.Pages
		c.Links += d.Links
		c.Clusters += d.Clusters
		c.Docs += d.Docs
		c.Words += d.Words
		c.Anchors += d.Anchors
		c.LastTs = max(c.LastTs, d.LastTs)
	}
	return encodeCorpus(c), nil
}

// queueCorpus queues a change of the corpus statistics; id names the
// row (page or cluster) whose change it is.
func queueCorpus(tx *framework.Txn, id string, d corpus) error {
	return corpusQueue.Add(tx, corpusRow, id, encodeCorpus(d))
}

// readCorpus reads the folded corpus statistics (zero in an empty index,
// or in a store written before they existed).
func readCorpus(ctx context.Context, tx *framework.Txn) (corpus, error) {
	b, err := tx.Get(ctx, StatsTable, corpusRow, corpusCol)
	if errors.Is(err, framework.ErrNotFound) {
		return corpus{}, nil
	}
	if err != nil {
		return corpus{}, err
	}
	c, err := decodeCorpus(b)
	if err != nil {
		return corpus{}, fmt.Errorf("%s/%s %s: %w", StatsTable, corpusRow, corpusCol, err)
	}
	return c, nil
}

// countPostings returns term's document frequency: the number of
// clusters posted under it, in their text or their anchor text (a merge
// of the two families' postings, which are in cluster order).
func countPostings(ctx context.Context, tx *framework.Txn, term string) (int64, error) {
	var n int64
	for _, err := range termPostings(ctx, tx, term) {
		if err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// Overview is what the index holds, as its statistics count it. The
// counts are folded from queued changes by weak observers, so right after
// a burst of loads they lag a little behind the pages.
type Overview struct {
	// Pages is the number of indexed pages; Links the distinct links out
	// of them (to loaded pages or not).
	Pages int64 `json:"pages"`
	Links int64 `json:"links"`
	// Clusters is the number of duplicate clusters (each listed once in
	// the top list); TextClusters those with text, which search covers.
	Clusters     int64 `json:"clusters"`
	TextClusters int64 `json:"text_clusters"`
	// Words is the number of words of the clusters' texts.
	Words int64 `json:"words"`
	// LastChange is when a page was last indexed (or the index bulk
	// loaded); zero if never.
	LastChange time.Time `json:"last_change"`
}

// Overview returns the index's statistics.
func (ix *Engine) Overview(ctx context.Context, db *framework.DB) (*Overview, error) {
	var o Overview
	err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		c, err := readCorpus(ctx, tx)
		if err != nil {
			return err
		}
		o = Overview{Pages: c.Pages, Links: c.Links, Clusters: c.Clusters, TextClusters: c.Docs, Words: c.Words}
		if c.LastTs != 0 {
			o.LastChange = oracle.Physical(c.LastTs).UTC()
		}
		return nil
	})
	return &o, err
}

// pageDelta is the change of the corpus statistics when a page's indexed
// document goes from old to cur (nil: not loaded), whose links go from
// before to after.
func pageDelta(tx *framework.Txn, old, cur *extract.Page, before, after map[string]string) corpus {
	d := corpus{Links: int64(len(after) - len(before)), LastTs: tx.StartTs()}
	switch {
	case old == nil && cur != nil:
		d.Pages = 1
	case old != nil && cur == nil:
		d.Pages = -1
	}
	return d
}
