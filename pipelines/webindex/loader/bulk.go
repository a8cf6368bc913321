package loader

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"maps"
	"sync"
	"time"

	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// runBulk is Run with Options.Bulk: it reads src to the end, keeps the
// last record of each URL (a delete drops the URL), parses the pages on
// Concurrency goroutines and bulk loads them into the empty index
// (webindex.BulkLoad). Bad records and input errors are counted and
// reported as Run reports them; the pages are then loaded at once, so
// Loaded counts every page once the import is done.
func (l *Loader) runBulk(ctx context.Context, src iter.Seq2[input.Record, error]) (Summary, error) {
	began := time.Now()
	last := map[string]input.Record{}
	var held int64 // bytes of the bodies in last
	for rec, err := range src {
		l.syncSkipped()
		if err != nil {
			l.sourceError(err)
			continue
		}
		l.c.read.Add(1)
		norm, err := extract.Normalize(rec.URL)
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
	var mu sync.Mutex
	pages := make(map[string]*extract.Page, len(last))
	recs := make(chan input.Record)
	var wg sync.WaitGroup
	for range l.opts.Concurrency {
		wg.Go(func() {
			for rec := range recs {
				p, err := extract.Parse(rec.URL, bytes.NewReader(rec.Body), l.opts.MaxBody)
				if err != nil {
					l.bad(rec, rec.URL, err)
					continue
				}
				mu.Lock()
				pages[p.URL] = p
				mu.Unlock()
			}
		})
	}
	for _, rec := range last {
		if !rec.Delete {
			recs <- rec
		}
	}
	close(recs)
	wg.Wait()
	ix, err := webindex.New(nil)
	if err != nil {
		return l.summary(began), err
	}
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
