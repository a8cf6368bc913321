package schema

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/combine"
)

// StatsTable holds the corpus statistics (one row, CorpusRow): what the
// index overview shows and what BM25 normalizes by.
const StatsTable = "stats"

var (
	CorpusRow = []byte("corpus")
	// CorpusCol holds the encoded corpus statistics.
	CorpusCol = framework.Column{Family: "stat", Qualifier: "corpus"}
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
var corpusQueue = mustQueue(combine.Config{Name: "webindex-corpus", Table: StatsTable, Value: CorpusCol, Combine: combineCorpus})

// RegisterQueues adds the observer folding the queued corpus statistics
// (webindex-corpus, weak, stats/webindex-corpus.q).
func RegisterQueues(reg *framework.Registry) error {
	return corpusQueue.Register(reg)
}

func mustQueue(cfg combine.Config) *combine.Queue {
	q, err := combine.New(cfg)
	if err != nil {
		panic(err) // the configs above are complete
	}
	return q
}

// Corpus is the statistics of the whole index.
type Corpus struct {
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

// EncodeCorpus encodes c; in a queued update the counts are deltas
// (zigzag varints, as the value itself).
func EncodeCorpus(c Corpus) []byte {
	b := []byte{corpusVersion}
	for _, v := range []int64{c.Pages, c.Links, c.Clusters, c.Docs, c.Words, c.Anchors} {
		b = binary.AppendVarint(b, v)
	}
	return binary.AppendUvarint(b, c.LastTs)
}

func DecodeCorpus(b []byte) (Corpus, error) {
	if len(b) == 0 || (b[0] != corpusVersion && b[0] != noAnchorsCorpusVersion) {
		return Corpus{}, fmt.Errorf("%w: corpus statistics have unknown version", ErrCorrupt)
	}
	d := NewDecoder(b[1:])
	var c Corpus
	for _, p := range []*int64{&c.Pages, &c.Links, &c.Clusters, &c.Docs, &c.Words} {
		*p = d.Varint()
	}
	if b[0] == corpusVersion {
		c.Anchors = d.Varint()
	}
	c.LastTs = d.Uvarint()
	if d.Err() != nil || d.Len() != 0 {
		return Corpus{}, fmt.Errorf("%w: corpus statistics of %d bytes are truncated or have trailing bytes", ErrCorrupt, len(b))
	}
	return c, nil
}

// combineCorpus adds queued deltas to the corpus statistics.
func combineCorpus(cur []byte, updates [][]byte) ([]byte, error) {
	var c Corpus
	if cur != nil {
		var err error
		if c, err = DecodeCorpus(cur); err != nil {
			return nil, err
		}
	}
	for _, u := range updates {
		d, err := DecodeCorpus(u)
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
	return EncodeCorpus(c), nil
}

// QueueCorpus queues a change of the corpus statistics; id names the
// row (page or cluster) whose change it is.
func QueueCorpus(tx *framework.Txn, id string, d Corpus) error {
	return corpusQueue.Add(tx, CorpusRow, id, EncodeCorpus(d))
}

// ReadCorpus reads the folded corpus statistics (zero in an empty index,
// or in a store written before they existed).
func ReadCorpus(ctx context.Context, tx *framework.Txn) (Corpus, error) {
	b, err := tx.Get(ctx, StatsTable, CorpusRow, CorpusCol)
	if errors.Is(err, framework.ErrNotFound) {
		return Corpus{}, nil
	}
	if err != nil {
		return Corpus{}, err
	}
	c, err := DecodeCorpus(b)
	if err != nil {
		return Corpus{}, fmt.Errorf("%s/%s %s: %w", StatsTable, CorpusRow, CorpusCol, err)
	}
	return c, nil
}

// CountPostings returns term's document frequency: the number of
// clusters posted under it, in their text or their anchor text (a merge
// of the two families' postings, which are in cluster order).
func CountPostings(ctx context.Context, tx *framework.Txn, term string) (int64, error) {
	var n int64
	for _, err := range TermPostings(ctx, tx, term) {
		if err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}
