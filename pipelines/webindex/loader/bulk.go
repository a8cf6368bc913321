package loader

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// BulkPhase is the step a bulk run is at: its counts say little until the
// import is done, since every page is loaded at once at its end.
type BulkPhase int32

// The steps of a bulk run, in order.
const (
	// BulkIdle: no bulk run has started (the zero value).
	BulkIdle BulkPhase = iota
	// BulkReading: reading the inputs to the end.
	BulkReading
	// BulkParsing: parsing the pages read.
	BulkParsing
	// BulkImporting: computing the whole index and importing it.
	BulkImporting
	// BulkDone: the run ended, loaded or not.
	BulkDone
)

// bulkPhaseNames are the phases' names, as progress lines show them.
var bulkPhaseNames = [...]string{BulkIdle: "idle", BulkReading: "reading", BulkParsing: "parsing", BulkImporting: "computing and importing", BulkDone: "done"}

// String names the phase as progress lines show it.
func (p BulkPhase) String() string {
	if p >= 0 && int(p) < len(bulkPhaseNames) {
		return bulkPhaseNames[p]
	}
	return fmt.Sprintf("BulkPhase(%d)", int32(p))
}

// bulkState is a bulk run's progress, read by BulkProgress while it runs.
type bulkState struct {
	phase                  atomic.Int32
	parsed, toParse, pages atomic.Int64
}

// BulkStatus is where a run with Options.Bulk is.
type BulkStatus struct {
	Phase BulkPhase
	// Parsed and ToParse are the pages parsed so far and to parse, known
	// from BulkParsing on.
	Parsed, ToParse int64
	// Pages is the number of pages imported, known from BulkImporting on
	// (ToParse less those that failed to parse).
	Pages int64
}

// BulkProgress reports where a run with Options.Bulk is. Progress's
// loaded count stays at zero until the import is done, since every page
// is loaded at once at its end.
func (l *Loader) BulkProgress() BulkStatus {
	return BulkStatus{Phase: BulkPhase(l.bulk.phase.Load()), Parsed: l.bulk.parsed.Load(), ToParse: l.bulk.toParse.Load(), Pages: l.bulk.pages.Load()}
}

// setPhase moves a bulk run to phase p, and logs it.
func (l *Loader) setPhase(p BulkPhase, began time.Time, args ...any) {
	l.bulk.phase.Store(int32(p))
	l.opts.Logger.Info("bulk load: "+p.String(), append(args, "elapsed", time.Since(began).Round(time.Millisecond))...)
}

// runBulk is Run with Options.Bulk: it reads src to the end, keeps the
// last record of each URL (a delete drops the URL), parses the pages on
// Concurrency goroutines and bulk loads them into the empty index
// (webindex.BulkLoad). Bad records and input errors are counted and
// reported as Run reports them; the pages are then loaded at once, so
// Loaded counts every page once the import is done.
func (l *Loader) runBulk(ctx context.Context, src iter.Seq2[input.Record, error]) (Summary, error) {
	began := time.Now()
	defer l.bulk.phase.Store(int32(BulkDone))
	l.setPhase(BulkReading, began)
	last := map[extract.CanonicalURL]input.Record{}
	var held int64 // bytes of the bodies in last
	for rec, err := range src {
		l.syncSkipped()
		if err != nil {
			l.sourceError(err)
			continue
		}
		l.c.read.Add(1)
		norm, err := extract.NormalizeURL(rec.URL)
		if err != nil {
			l.bad(rec, "", err)
			continue
		}
		if old, dup := last[norm]; dup {
			l.c.superseded.Add(1)
			held -= int64(len(old.Body))
		}
		last[norm] = rec
		if held += int64(len(rec.Body)); l.opts.BulkMaxBytes >= 0 && held > l.opts.BulkMaxBytes {
			return l.summary(began), fmt.Errorf("%w: the pages read so far (%d, up to %s) hold %d bytes, more than BulkMaxBytes (loader -bulk-max-bytes) allows: %d. "+
				"A bulk load holds all pages in memory, about 16 times their size; nothing was written. Load page by page (without -bulk), or raise the cap if the machine has the memory",
				ErrBulkTooLarge, len(last), rec.URL, held, l.opts.BulkMaxBytes)
		}
		if err := ctx.Err(); err != nil {
			return l.summary(began), fmt.Errorf("loader: bulk load stopped while reading: %w", err)
		}
	}
	for _, rec := range last {
		if !rec.Delete {
			l.bulk.toParse.Add(1)
		}
	}
	l.setPhase(BulkParsing, began, "pages", l.bulk.toParse.Load(), "bytes", held)
	var mu sync.Mutex
	pages := make(map[string]*extract.Page, len(last))
	recs := make(chan item)
	var wg sync.WaitGroup
	for range l.opts.Concurrency {
		wg.Go(func() {
			for it := range recs {
				p, err := extract.ParseCanonical(it.url, bytes.NewReader(it.rec.Body), l.opts.MaxBody)
				l.bulk.parsed.Add(1)
				if err != nil {
					l.bad(it.rec, it.rec.URL, err)
					continue
				}
				mu.Lock()
				pages[p.URL] = p
				mu.Unlock()
			}
		})
	}
	for u, rec := range last {
		if !rec.Delete {
			recs <- item{rec: rec, url: u}
		}
	}
	close(recs)
	wg.Wait()
	ix, err := webindex.New(nil)
	if err != nil {
		return l.summary(began), err
	}
	l.bulk.pages.Store(int64(len(pages)))
	l.setPhase(BulkImporting, began, "pages", len(pages))
	st, err := ix.BulkLoad(ctx, l.db, pages, &webindex.BulkOptions{Resume: l.opts.BulkResume})
	if err == nil {
		l.c.loaded.Add(int64(st.Pages))
		l.opts.Logger.Info("bulk load done", "pages", st.Pages, "written_meanwhile", st.Fenced, "resumed", st.Resumed)
	}
	return l.summary(began), err
}

// summary is the Summary of the run so far.
func (l *Loader) summary(began time.Time) Summary {
	s := Summary{Counts: l.c.snapshot(), Elapsed: time.Since(began)}
	if l.opts.Stats != nil {
		s.SkipReasons = maps.Clone(l.opts.Stats.Skipped)
	}
	l.mu.Lock()
	if len(l.badReasons) > 0 {
		s.BadReasons = maps.Clone(l.badReasons)
	}
	l.mu.Unlock()
	return s
}
