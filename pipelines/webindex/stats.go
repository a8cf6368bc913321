package webindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/combine"
	"github.com/trickle-dev/trickle/framework/oracle"
	"github.com/trickle-dev/trickle/internal/codec"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// StatsTable holds the corpus statistics (one row, corpusRow): what the
// index overview shows and what BM25 normalizes by.
const StatsTable = "stats"

var (
	corpusRow = []byte("corpus")
	// corpusCol holds the encoded corpus statistics.
	corpusCol = framework.Column{Family: "stat", Qualifier: "corpus"}
	// dfCol, on a term's row of TermsTable, is the number of clusters
	// posted under the term (decimal).
	dfCol = framework.Column{Family: "stat", Qualifier: "df"}
)

// Every cluster posting or unposting a term changes the term's document
// frequency, and every page and cluster changes the corpus statistics: a
// frequent term's row and the corpus row would be collision hot spots if
// updated in place. Both are queued instead (one distinct cell per
// change) and folded by weak observers.
//
// The corpus statistics are one value, folded by a combine.Queue. The
// document frequencies are as many values as there are terms, and a new
// page posts hundreds of terms: folding each term's queue on its own row
// would cost a transaction per term and page. Their changes are queued in
// dfBuckets rows of StatsTable instead (a term always in the same one),
// and one fold of a bucket adds all the changes queued there to their
// terms' counts. Two folds of different buckets never write the same
// term; two of the same bucket conflict, and weak notifications collapse.
var corpusQueue = mustQueue(combine.Config{Name: "webindex-corpus", Table: StatsTable, Value: corpusCol, Combine: combineCorpus})

// dfBuckets is the number of rows document frequency changes are queued
// in: enough that folds run in parallel, few enough that a burst of pages
// costs a handful of folds.
const dfBuckets = 64

var (
	// dfQueueFamily holds the queued changes of a bucket row: qualifier
	// term, a zero byte, the writer's start timestamp and cluster key;
	// value the decimal change.
	dfQueueFamily = "dfq"
	// dfNotify is weakly notified on a bucket row when a change is queued.
	dfNotify = framework.Column{Family: "dfq-changed", Qualifier: ""}
)

// dfBucket is the StatsTable row term's changes are queued in.
func dfBucket(term string) []byte {
	h := fnv.New32a()
	h.Write([]byte(term))
	return fmt.Appendf(nil, "dfq/%02d", h.Sum32()%dfBuckets)
}

// registerQueues adds the observers folding the queued statistics:
// webindex-df (weak, stats/dfq-changed) and webindex-corpus (weak,
// stats/webindex-corpus.q).
func registerQueues(reg *framework.Registry) error {
	if err := reg.Register(framework.Observer{Name: dfObserver, Table: StatsTable, Columns: []framework.Column{dfNotify}, Kind: framework.Weak, Fn: foldDF}); err != nil {
		return err
	}
	return corpusQueue.Register(reg)
}

// dfObserver names the document frequency fold (stored in ack columns).
const dfObserver = "webindex-df"

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
	// them with text (BM25's N), Words the words of their texts.
	Clusters, Docs, Words int64
	// LastTs is the timestamp of the latest indexing of a page (or of the
	// bulk load): a maximum, not a sum.
	LastTs uint64
}

const corpusVersion = 1

// encodeCorpus encodes c; in a queued update the counts are deltas
// (zigzag varints, as the value itself).
func encodeCorpus(c corpus) []byte {
	b := []byte{corpusVersion}
	for _, v := range []int64{c.Pages, c.Links, c.Clusters, c.Docs, c.Words} {
		b = binary.AppendVarint(b, v)
	}
	return binary.AppendUvarint(b, c.LastTs)
}

func decodeCorpus(b []byte) (corpus, error) {
	if len(b) == 0 || b[0] != corpusVersion {
		return corpus{}, fmt.Errorf("%w: corpus statistics have unknown version", ErrCorrupt)
	}
	d := decoder{codec.NewReader(b[1:])}
	var c corpus
	for _, p := range []*int64{&c.Pages, &c.Links, &c.Clusters, &c.Docs, &c.Words} {
		*p = d.Varint()
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
		c.LastTs = max(c.LastTs, d.LastTs)
	}
	return encodeCorpus(c), nil
}

// queueCorpus queues a change of the corpus statistics; id names the
// row (page or cluster) whose change it is.
func queueCorpus(tx *framework.Txn, id string, d corpus) error {
	return corpusQueue.Add(tx, corpusRow, id, encodeCorpus(d))
}

// queueDF queues a change of term's document frequency by cluster key.
func queueDF(tx *framework.Txn, term, key string, delta int64) error {
	row := dfBucket(term)
	col := framework.Column{Family: dfQueueFamily, Qualifier: fmt.Sprintf("%s\x00%016x/%s", term, tx.StartTs(), key)}
	if err := tx.Set(StatsTable, row, col, strconv.AppendInt(nil, delta, 10)); err != nil {
		return err
	}
	return tx.NotifyWeak(StatsTable, row, dfNotify)
}

// foldDF adds the changes queued in a bucket row to their terms' document
// frequencies and deletes them, in one transaction: exactly the changes
// it read, so one queued meanwhile waits for the next fold.
func foldDF(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	sums := map[string]int64{}
	for e, err := range tx.Scan(ctx, rowScan(StatsTable, string(row), dfQueueFamily)) {
		if err != nil {
			return err
		}
		term, _, ok := strings.Cut(e.Column.Qualifier, "\x00")
		d, err := strconv.ParseInt(string(e.Value), 10, 64)
		if !ok || err != nil {
			return fmt.Errorf("%w: queued document frequency change %q = %q", ErrCorrupt, e.Column.Qualifier, e.Value)
		}
		sums[term] += d
		if err := tx.Delete(StatsTable, row, e.Column); err != nil {
			return err
		}
	}
	for term, d := range sums {
		if d == 0 {
			continue
		}
		n, err := readDF(ctx, tx, term)
		if err != nil {
			return err
		}
		switch n += d; {
		case n < 0:
			return fmt.Errorf("%w: document frequency of %q would be %d", ErrCorrupt, term, n)
		case n == 0:
			err = tx.Delete(TermsTable, []byte(term), dfCol)
		default:
			err = tx.Set(TermsTable, []byte(term), dfCol, strconv.AppendInt(nil, n, 10))
		}
		if err != nil {
			return err
		}
	}
	return nil
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

// readDF reads term's folded document frequency.
func readDF(ctx context.Context, tx *framework.Txn, term string) (int64, error) {
	b, err := tx.Get(ctx, TermsTable, []byte(term), dfCol)
	if errors.Is(err, framework.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: document frequency of %q: %q", ErrCorrupt, term, b)
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
func (ix *Index) Overview(ctx context.Context, db *framework.DB) (*Overview, error) {
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
