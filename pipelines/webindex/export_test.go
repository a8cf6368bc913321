package webindex

import (
	"context"
	"encoding/binary"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/bulk"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// CorpusWithoutTime returns an encoded corpus statistics cell with its
// last-change timestamp zeroed, which differs between a bulk load and the
// observers.
func CorpusWithoutTime(b []byte) ([]byte, error) {
	c, err := schema.DecodeCorpus(b)
	c.LastTs = 0
	return schema.EncodeCorpus(c), err
}

// LegacyState encodes a cluster state the way stores written before
// cluster:terms existed hold it: the posted terms inside the state.
func LegacyState(canonical string, inbound int64, terms []string) []byte {
	b := []byte{schema.LegacyStateVersion}
	b = schema.AppendString(b, canonical)
	b = binary.AppendUvarint(b, uint64(inbound))
	b = binary.AppendUvarint(b, uint64(len(terms)))
	for _, t := range terms {
		b = schema.AppendString(b, t)
	}
	return b
}

// NewWithoutRetraction returns an Index that, when a page's outlinks
// change, does not take back the rank it sent to the targets it no longer
// counts: what the tests show the retraction is needed for.
func NewWithoutRetraction(opts *Options) (*Index, error) {
	ix, err := New(opts)
	if err != nil {
		return nil, err
	}
	ix.knobs.noRetraction = true
	return ix, nil
}

// NewWithoutRows returns an Index that keeps no page's row of the
// canonical table (nor exports any): what indexing cost before the rows
// existed.
func NewWithoutRows(opts *Options) (*Index, error) {
	ix, err := New(opts)
	if err != nil {
		return nil, err
	}
	ix.knobs.noRows = true
	return ix, nil
}

// PageRankResidual is url's residual: folded plus queued.
func PageRankResidual(ctx context.Context, tx *framework.Txn, url string) (float64, error) {
	s, err := schema.ReadPRState(ctx, tx, url)
	if err != nil {
		return 0, err
	}
	q, _, err := queuedResidual(ctx, tx, url)
	return s.Residual + q, err
}

// BulkHooks sets the points where a test interleaves work with a bulk
// load: once its fence is up, and once its import is written.
func BulkHooks(o *BulkOptions, afterFence, afterImport func(ctx context.Context) error) {
	o.afterFence, o.afterImport = afterFence, afterImport
}

// ComputeBulk passes the cells of the bulk-computed index of pages to
// set, in the order a bulk load imports them.
func ComputeBulk(ctx context.Context, ix *Index, db *framework.DB, pages map[string]*extract.Page,
	set func(table string, row []byte, col framework.Column, value []byte) error) error {
	_, err := ComputeBulkWith(ctx, ix, db, pages, nil, set)
	return err
}

// ComputeBulkWith is ComputeBulk with options (MemoryBytes, TempDir), and
// returns the load's stats (what it spilled).
func ComputeBulkWith(ctx context.Context, ix *Index, db *framework.DB, pages map[string]*extract.Page, opts *BulkOptions,
	set func(table string, row []byte, col framework.Column, value []byte) error) (BulkStats, error) {
	var o BulkOptions
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	res, err := bulk.Compute(ctx, db, sortedPages(pages), ix.bulkConfig(&o), set)
	return BulkStats{Pages: int(res.Pages), Spills: res.Spills, SpilledBytes: res.SpilledBytes}, err
}

// ComputeBulkInMemory passes the cells of the index of pages as the bulk
// computation made them before it streamed, every table in memory: the
// reference the streaming one must equal.
func ComputeBulkInMemory(ctx context.Context, ix *Index, db *framework.DB, pages map[string]*extract.Page,
	set func(table string, row []byte, col framework.Column, value []byte) error) error {
	return ix.memComputeBulk(ctx, db, pages, set)
}

// MinBulkMemory is the least BulkOptions.MemoryBytes allowed.
const MinBulkMemory = minBulkMemory

// Recompute runs the cluster observer's recompute of the cluster key in tx.
func (ix *Index) Recompute(ctx context.Context, tx *framework.Txn, key string) error {
	return ix.recompute(ctx, tx, key)
}

// AnchorTerms decodes folded anchor term counts (page:anchor-terms),
// adding them to terms.
func AnchorTerms(b []byte, terms map[string]int64) error {
	_, err := schema.DecodeTermCounts(b, terms)
	return err
}
