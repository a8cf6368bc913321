package webindex

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"os"
	"slices"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/pipelines/webindex/bulk"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// ErrNotEmpty is returned by BulkLoad when the index holds pages or
// anything derived from them: a bulk load builds a whole index, so it is
// only for an empty one. Nothing stored is changed.
var ErrNotEmpty = errors.New("webindex: the index is not empty")

// BulkOptions configure BulkLoad. The zero value is usable.
type BulkOptions struct {
	// Resume takes over the bulk load whose fence is up, instead of
	// failing with ErrBulkLoadInProgress: what its import wrote is removed
	// and written again (from these pages), or, if its import was
	// complete, the fence is closed. Only resume a bulk load whose process
	// is gone. Default: false.
	Resume bool
	// ChunkBytes is about how much of the index is built in memory before
	// it is written (framework.ImportOptions.ChunkBytes). Default: the
	// framework's.
	ChunkBytes int
	// MemoryBytes is about how much memory the computation's buffers may
	// use: the index is computed by sorting what the pages say into runs
	// spilled to TempDir and merging them, so a corpus of any size loads
	// within it. Its buffers take about half of it; the rest is left to
	// the pages in flight, the import's chunks and the garbage collector
	// (a process running a bulk load should set its soft memory limit,
	// GOMEMLIMIT, to about this much). Default: DefaultBulkMemory.
	MemoryBytes int64
	// TempDir is where the computation spills its runs, in a directory
	// of its own removed when it ends; it needs about three times the
	// size of the pages' text free. Default: os.TempDir().
	TempDir string
	// ExpectedPages, if known, is the number of pages to load, for the
	// progress log's estimate of the first phase's end. Default: 0
	// (unknown).
	ExpectedPages int64
	// Logger receives the progress of a long bulk load: each phase, and
	// every 10 seconds how far through it the load is and its estimated
	// end. Default: slog.Default().
	Logger *slog.Logger

	// afterFence and afterImport are called, if set, once the fence is up
	// and once the import is written (before the fence closes): tests run
	// concurrent loads there.
	afterFence, afterImport func(ctx context.Context) error
}

// DefaultBulkMemory is the default of BulkOptions.MemoryBytes: 1 GiB.
const DefaultBulkMemory = 1 << 30

// minBulkMemory is the least BulkOptions.MemoryBytes Validate accepts.
const minBulkMemory = 64 << 10

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *BulkOptions) EnsureDefaults() *BulkOptions {
	if o.MemoryBytes == 0 {
		o.MemoryBytes = DefaultBulkMemory
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports the first unusable field.
func (o *BulkOptions) Validate() error {
	switch {
	case o.MemoryBytes < minBulkMemory:
		return fmt.Errorf("webindex: BulkOptions.MemoryBytes %d is below the least usable, %d", o.MemoryBytes, minBulkMemory)
	case o.ChunkBytes < 0:
		return fmt.Errorf("webindex: BulkOptions.ChunkBytes %d is negative", o.ChunkBytes)
	}
	return nil
}

// BulkStats reports what a bulk load did.
type BulkStats struct {
	// Pages is the number of pages imported.
	Pages int
	// StartTs and CommitTs are the timestamps of the import.
	StartTs, CommitTs uint64
	// Fenced is the number of pages written (or deleted) by others while
	// the import was under way, which were indexed after it.
	Fenced int
	// Resumed is set when the load took over an earlier one.
	Resumed bool
	// Exported is the number of pages notified for export (their rows of
	// the canonical table) once the import was done: every page, when a
	// runner exports the index (Options.Export), else 0.
	Exported int64
	// Spills is the number of sorted runs the computation wrote to
	// disk, and SpilledBytes their size: none when the corpus fits in
	// BulkOptions.MemoryBytes.
	Spills       int
	SpilledBytes int64
}

// BulkLoad fills an empty index with pages (keyed by normalized URL, as
// extract.Parse returns them) in one pass: it computes the index as the
// observers would have left it after loading every page and imports it as
// committed data (framework.DB.Import), which takes about as long as
// computing it, where loading page by page runs every observer
// transaction. The computation sorts what the pages say (links by
// target, pages by cluster, postings by term) externally, within
// BulkOptions.MemoryBytes, and passes the tables to the import in key
// order, so the corpus need not fit in memory: see BulkLoadSorted, which
// takes the pages as a stream. Pages loaded by others meanwhile (PutPage, DeletePage) are
// not lost and not counted twice: they are indexed once the import is
// complete, against it. See "Bulk loading" in the package documentation
// for the protocol, and what a reader may see while it runs.
//
// It fails with ErrNotEmpty if the index holds anything, and with
// ErrBulkLoadInProgress if another bulk load's fence is up (see
// BulkOptions.Resume and AbortBulkLoad). Any other error leaves the fence
// up: pages loaded meanwhile wait under it, not indexed, until the load is
// resumed or aborted.
func (ix *Index) BulkLoad(ctx context.Context, db *framework.DB, pages map[string]*extract.Page, opts *BulkOptions) (BulkStats, error) {
	for u, p := range pages {
		if p == nil || p.URL != u {
			return BulkStats{}, fmt.Errorf("webindex: BulkLoad: page under %q is not the page of that URL", u)
		}
		if norm, err := extract.Normalize(u); err != nil || norm != u {
			return BulkStats{}, fmt.Errorf("webindex: BulkLoad: URL %q is not normalized", u)
		}
	}
	return ix.BulkLoadSorted(ctx, db, sortedPages(pages), opts)
}

// sortedPages yields pages in the order of their URLs.
func sortedPages(pages map[string]*extract.Page) iter.Seq2[*extract.Page, error] {
	return func(yield func(*extract.Page, error) bool) {
		for _, u := range slices.Sorted(maps.Keys(pages)) {
			if !yield(pages[u], nil) {
				return
			}
		}
	}
}

// BulkLoadSorted is BulkLoad of pages streamed in the order of their
// URLs (each normalized, as extract.Parse returns them, and each once),
// within BulkOptions.MemoryBytes however many there are: the loader's
// way in. A page out of order, or an error pages yields, stops the load
// with its fence up (see BulkLoad). pages may be ranged over more than
// once, from the start, when the load is resumed.
func (ix *Index) BulkLoadSorted(ctx context.Context, db *framework.DB, pages iter.Seq2[*extract.Page, error], opts *BulkOptions) (BulkStats, error) {
	var o BulkOptions
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return BulkStats{}, err
	}
	var stats BulkStats
	var prev *fence
	if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) (err error) {
		prev, err = readFence(ctx, tx)
		return err
	}); err != nil {
		return stats, err
	}
	switch {
	case prev != nil && !o.Resume:
		return stats, fmt.Errorf("%w (import at %d, %d; phase %d): resume it, or abort it, once its process is gone", ErrBulkLoadInProgress, prev.startTs, prev.commitTs, prev.phase)
	case prev != nil:
		stats.Resumed = true
	}
	imp := &framework.ImportOptions{Tables: importTables, ChunkBytes: o.ChunkBytes}
	if prev != nil {
		imp.StartTs, imp.CommitTs = prev.startTs, prev.commitTs
	}
	var attempt uint64
	var fenced bool
	err := db.Import(ctx, imp, func(ctx context.Context, im *framework.Importer) error {
		stats.StartTs, stats.CommitTs = im.StartTs(), im.CommitTs()
		f, err := raiseFence(ctx, db, prev, im.StartTs(), im.CommitTs())
		if err != nil {
			return err
		}
		fenced, attempt = true, f.attempt
		if f.phase == phaseClosing {
			return errImportDone
		}
		if err := activateFence(ctx, db, f.attempt); err != nil {
			return err
		}
		if o.afterFence != nil {
			if err := o.afterFence(ctx); err != nil {
				return err
			}
		}
		res, err := bulk.Compute(ctx, db, pages, ix.bulkConfig(&o), im.Set)
		stats.Pages, stats.Spills, stats.SpilledBytes = int(res.Pages), res.Spills, res.SpilledBytes
		return err
	})
	switch {
	case errors.Is(err, errImportDone):
	case errors.Is(err, framework.ErrImportNotEmpty):
		// Something was written to the index, under the fence, by a
		// transaction that started before it: give the load up.
		if aerr := abort(ctx, db, stats.StartTs, stats.CommitTs, attempt); aerr != nil {
			return stats, fmt.Errorf("%w: %w (and giving the bulk load up failed: %w)", ErrNotEmpty, err, aerr)
		}
		return stats, fmt.Errorf("%w: %w", ErrNotEmpty, err)
	case err != nil && fenced:
		return stats, fmt.Errorf("webindex: bulk load stopped with its fence up (resume or abort it): %w", err)
	case err != nil:
		return stats, err
	}
	if o.afterImport != nil {
		if err := o.afterImport(ctx); err != nil {
			return stats, err
		}
	}
	n, err := closeFence(ctx, db, attempt)
	stats.Fenced = n
	if err != nil {
		return stats, err
	}
	// An import notifies no observer: an export a runner runs (see
	// Options.Export) learns of the imported rows by a backfill.
	p, err := admin.Backfill(ctx, db, ExportObserver, nil)
	switch {
	case errors.Is(err, admin.ErrUnknownObserver):
		return stats, nil
	case err != nil:
		return stats, fmt.Errorf("webindex: bulk load complete, but notifying its pages for export failed (run `runner backfill %s`): %w", ExportObserver, err)
	}
	stats.Exported = p.Cells
	return stats, nil
}

// errImportDone stops the import of a resumed load whose import was
// complete.
// Config is what the bulk computation needs of o and of the index.
func (ix *Index) bulkConfig(o *BulkOptions) *bulk.Config {
	cfg := &bulk.Config{MemoryBytes: o.MemoryBytes, TempDir: o.TempDir, Logger: o.Logger, ExpectedPages: o.ExpectedPages, Ranker: ix.opts.Ranker}
	if pr := ix.opts.PageRank; pr != nil {
		cfg.PageRank, cfg.Tolerance = true, pr.Tolerance
	}
	return cfg
}

var errImportDone = errors.New("webindex: the import is complete")

// importTables are the tables a bulk load writes.
var importTables = []string{schema.PagesTable, schema.ClustersTable, schema.TermsTable, schema.TopTable, schema.SitesTable, schema.StatsTable}

// raiseFence puts the fence up, for an import at startTs and commitTs,
// after checking that the index is empty; or, when resuming (prev set),
// takes the fence prev over.
func raiseFence(ctx context.Context, db *framework.DB, prev *fence, startTs, commitTs uint64) (*fence, error) {
	var f *fence
	err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		cur, err := readFence(ctx, tx)
		switch {
		case err != nil:
			return err
		case prev == nil && cur != nil:
			return fmt.Errorf("%w (import at %d, %d)", ErrBulkLoadInProgress, cur.startTs, cur.commitTs)
		case prev != nil && (cur == nil || cur.startTs != prev.startTs || cur.attempt != prev.attempt):
			return fmt.Errorf("%w: the bulk load being resumed changed meanwhile", ErrBulkLoadInProgress)
		case prev != nil:
			f = &fence{phase: cur.phase, startTs: cur.startTs, commitTs: cur.commitTs, attempt: cur.attempt + 1, active: cur.active}
		default:
			for _, t := range importTables {
				for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: t}) {
					if err != nil {
						return err
					}
					return fmt.Errorf("%w: %s/%q %s", ErrNotEmpty, t, e.Row, e.Column)
				}
			}
			f = &fence{phase: phaseImporting, startTs: startTs, commitTs: commitTs, active: notActive}
		}
		return tx.Set(schema.FenceTable, fenceRow, fenceState, encodeFence(f))
	})
	return f, err
}

// AbortBulkLoad gives up the bulk load whose fence is up, for when it
// cannot be resumed: what its import wrote is removed (unless the import
// was complete, in which case the index is kept), and the fence is closed,
// so that pages loaded meanwhile are indexed as usual. It reports whether
// there was a bulk load to abort. Only abort a bulk load whose process is
// gone.
func (ix *Index) AbortBulkLoad(ctx context.Context, db *framework.DB) (bool, error) {
	var f *fence
	err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) (err error) {
		if f, err = readFence(ctx, tx); err != nil || f == nil {
			return err
		}
		f.attempt++ // the aborted run, if alive, can no longer close it
		return tx.Set(schema.FenceTable, fenceRow, fenceState, encodeFence(f))
	})
	if err != nil || f == nil {
		return false, err
	}
	if f.phase == phaseClosing {
		_, err = closeFence(ctx, db, f.attempt)
		return true, err
	}
	return true, abort(ctx, db, f.startTs, f.commitTs, f.attempt)
}

// abort removes what the import at startTs, commitTs wrote and closes the
// fence (attempt) without it.
func abort(ctx context.Context, db *framework.DB, startTs, commitTs, attempt uint64) error {
	if err := db.Import(ctx, &framework.ImportOptions{Tables: importTables, StartTs: startTs, CommitTs: commitTs, Discard: true}, nil); err != nil {
		return err
	}
	_, err := closeFence(ctx, db, attempt)
	return err
}
