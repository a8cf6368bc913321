package loader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"iter"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/store"
)

// Loader loads records into the web index. Create it with New, start it
// with Run (once), and read Progress from any goroutine while it runs.
type Loader struct {
	db   *framework.DB
	opts Options
	seed maphash.Seed
	ran  atomic.Bool

	c      counters
	tracer trace.Tracer
	// pages writes the pages, reading the bulk load fence only while a
	// bulk load may be under way.
	pages webindex.PageWriter
	// bulk is where a bulk run is (see BulkProgress).
	bulk bulkState

	mu         sync.Mutex // serializes OnProblem; guards badReasons
	badReasons map[string]int64

	// down is when writes began failing for want of an answer from the
	// store (zero while it answers); stop ends the run when that lasts
	// longer than Options.Unreachable.
	downMu sync.Mutex
	down   time.Time
	stop   context.CancelCauseFunc
}

// ErrUnreachable is the cause of a run stopped because the store did not
// answer for Options.Unreachable.
var ErrUnreachable = errors.New("loader: the store does not answer")

// counters are Counts updated atomically while a run goes on.
type counters struct {
	read, loaded, replaced, unchanged, deleted, superseded atomic.Int64
	bad, inputErrors, failed, abandoned                    atomic.Int64
	// skipped is the sources' Stats.SkippedTotal; symlinks are the
	// symbolic links Dir reported, which count as skipped too.
	skipped, symlinks atomic.Int64
}

func (c *counters) snapshot() Counts {
	return Counts{
		Read: c.read.Load(), Loaded: c.loaded.Load(), Replaced: c.replaced.Load(), Unchanged: c.unchanged.Load(),
		Deleted: c.deleted.Load(), Superseded: c.superseded.Load(), Skipped: c.skipped.Load() + c.symlinks.Load(), Bad: c.bad.Load(),
		InputErrors: c.inputErrors.Load(), Failed: c.failed.Load(), Abandoned: c.abandoned.Load(),
	}
}

// New returns a Loader writing through db, which must notify the web
// index's page observer (open it with the web index's observers).
func New(db *framework.DB, opts Options) (*Loader, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: a DB is required", ErrInvalidOptions)
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := checkObserved(db); err != nil {
		return nil, err
	}
	l := &Loader{db: db, opts: opts, seed: maphash.MakeSeed(), badReasons: map[string]int64{}}
	l.tracer = opts.TracerProvider.Tracer(instrumentationName)
	if err := l.registerMetrics(opts.MeterProvider); err != nil {
		opts.Logger.Warn("loader metrics unavailable", "err", err)
	}
	return l, nil
}

// Run is New followed by Loader.Run.
func Run(ctx context.Context, db *framework.DB, src iter.Seq2[input.Record, error], opts Options) (Summary, error) {
	l, err := New(db, opts)
	if err != nil {
		return Summary{}, err
	}
	return l.Run(ctx, src)
}

// InputOptions returns the options sources should be built with: the
// loader's MaxBody and Stats.
func (l *Loader) InputOptions() input.Options {
	return input.Options{MaxBody: l.opts.MaxBody, Stats: l.opts.Stats}
}

// Progress returns the counters so far. It is safe to call from any
// goroutine while Run runs.
func (l *Loader) Progress() Counts { return l.c.snapshot() }

// item is one record on its way to the store.
type item struct {
	rec  input.Record
	url  extract.CanonicalURL // normalized once, when the record is read
	page *extract.Page
}

// batch is a group of records written in one transaction.
type batch struct {
	items []item
	bytes int64
}

// syncSkipped publishes the sources' skip count. It runs on the goroutine
// ranging over the source, the only one that may read Stats.
func (l *Loader) syncSkipped() {
	if l.opts.Stats != nil {
		l.c.skipped.Store(l.opts.Stats.SkippedTotal())
	}
}

func (l *Loader) report(p Problem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.Kind == BadRecord {
		l.badReasons[p.Reason]++
	}
	l.opts.OnProblem(p)
}

// sourceError handles an error yielded by a source.
func (l *Loader) sourceError(err error) {
	var br *input.BadRecord
	if errors.As(err, &br) && errors.Is(br.Err, input.ErrSymlinkSkipped) {
		// Not following links is a policy, not a defect of the input.
		l.c.symlinks.Add(1)
		l.report(Problem{Kind: Skipped, Reason: ReasonSymlink, Source: br.Source, Offset: br.Offset, Err: br.Err})
		return
	}
	if errors.As(err, &br) {
		l.c.read.Add(1)
		l.c.bad.Add(1)
		reason := badReason(br.Err)
		if reason == "" {
			reason = ReasonBadInput
		}
		l.report(Problem{Kind: BadRecord, Reason: reason, Source: br.Source, Offset: br.Offset, Line: br.Line, Err: br.Err})
		return
	}
	l.c.inputErrors.Add(1)
	l.report(Problem{Kind: InputError, Offset: -1, Err: err})
}

// bad counts and reports a record that cannot be loaded.
func (l *Loader) bad(rec input.Record, url string, err error) {
	l.c.bad.Add(1)
	reason := badReason(err)
	if reason == "" {
		reason = ReasonUnparsable
	}
	if url == "" {
		url = rec.URL
	}
	l.report(Problem{Kind: BadRecord, Reason: reason, Source: rec.Source, Offset: rec.Offset, Line: rec.Line, URL: url, Err: err})
}

// process parses a batch, drops superseded and bad records and writes the
// rest. No transaction starts once ctx has ended; those started run under
// wctx.
func (l *Loader) process(ctx, wctx context.Context, b *batch) {
	if ctx.Err() != nil {
		l.c.abandoned.Add(int64(len(b.items)))
		return
	}
	// One span per batch: the transactions writing it are its children, and
	// the page observer runs they trigger continue its trace.
	wctx, span := l.tracer.Start(wctx, "loader batch")
	records, pages := len(b.items), 0
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.Int("trickle.loader.records", records), attribute.Int("trickle.loader.pages", pages))
		}
		span.End()
	}()
	ok := b.items[:0]
	for _, it := range b.items {
		if !it.rec.Delete {
			p, err := extract.ParseCanonical(it.url, bytes.NewReader(it.rec.Body), l.opts.MaxBody)
			if err != nil {
				l.bad(it.rec, it.url.String(), err)
				continue
			}
			it.page = p
		}
		it.rec.Body = nil // parsed: let the memory go
		ok = append(ok, it)
	}
	// Keep the last record of each URL, in input order.
	last := make(map[extract.CanonicalURL]int, len(ok))
	for i, it := range ok {
		last[it.url] = i
	}
	items := make([]item, 0, len(last))
	for i, it := range ok {
		if last[it.url] == i {
			items = append(items, it)
		}
	}
	l.c.superseded.Add(int64(len(ok) - len(items)))
	if len(items) == 0 {
		return
	}
	if ctx.Err() != nil {
		l.c.abandoned.Add(int64(len(items)))
		return
	}
	pages = len(items)
	err := l.writeRetrying(ctx, wctx, items)
	if err == nil {
		return
	}
	if ctx.Err() != nil || wctx.Err() != nil {
		l.c.abandoned.Add(int64(len(items)))
		return
	}
	if len(items) == 1 {
		l.fail(items[0], err)
		return
	}
	// One record may be what breaks the batch: write each alone so that
	// only the records that cannot be written fail.
	l.opts.Logger.Debug("batch failed; retrying its records one by one", "records", len(items), "err", err)
	for i, it := range items {
		if ctx.Err() != nil {
			l.c.abandoned.Add(int64(len(items) - i))
			return
		}
		if err := l.writeRetrying(ctx, wctx, items[i:i+1]); err != nil {
			if ctx.Err() != nil || wctx.Err() != nil {
				l.c.abandoned.Add(1)
				continue // the rest are abandoned above
			}
			l.fail(it, err)
		}
	}
}

func (l *Loader) fail(it item, err error) {
	l.c.failed.Add(1)
	l.report(Problem{Kind: Failed, Source: it.rec.Source, Offset: it.rec.Offset, Line: it.rec.Line, URL: it.url.String(), Err: err})
}

// writeRetrying is write, retried while the store does not answer, for up
// to Options.Unreachable since writes began failing so (in any batch);
// past that it stops the run with ErrUnreachable. Retries sleep on ctx
// (the run's), so a stopped run retries no more.
func (l *Loader) writeRetrying(ctx, wctx context.Context, items []item) error {
	for attempt := 1; ; attempt++ {
		// During an outage, no attempt waits past the time left to give up.
		actx, cancel := wctx, context.CancelFunc(func() {})
		if since, down := l.outage(); down && l.opts.Unreachable > 0 {
			actx, cancel = context.WithDeadline(wctx, since.Add(l.opts.Unreachable))
		}
		err := l.write(actx, items)
		cut := actx.Err() != nil && wctx.Err() == nil
		cancel()
		if err != nil && cut && !errors.Is(err, store.ErrUnavailable) {
			err = fmt.Errorf("%w: no answer before the time to give up: %w", store.ErrUnavailable, err)
		}
		if err == nil || !errors.Is(err, store.ErrUnavailable) || l.opts.Unreachable < 0 {
			if err == nil {
				l.answered()
			}
			return err
		}
		down := l.unanswered()
		if down >= l.opts.Unreachable {
			l.stop(fmt.Errorf("%w for %v: %w", ErrUnreachable, down.Round(time.Second), err))
			return err
		}
		if attempt == 1 {
			l.opts.Logger.Warn("the store does not answer; retrying", "for", down.Round(time.Millisecond), "give_up_after", l.opts.Unreachable, "err", err)
		}
		select { // time.After's timer is collected even if ctx ends first
		case <-ctx.Done():
			return err
		case <-time.After(min(retryPause(attempt), l.opts.Unreachable-down)):
		}
	}
}

// retryPause is the pause before retry attempt (counted from 1) of a
// write the store did not answer: 100ms doubled per attempt up to 2s,
// drawn at random from its upper half, so that the loaders an outage
// stopped together do not all retry at the same moment.
func retryPause(attempt int) time.Duration {
	d := min(100*time.Millisecond<<min(attempt-1, 5), 2*time.Second)
	return d/2 + rand.N(d/2+1)
}

// unanswered records a write that failed for want of an answer and returns
// how long writes have been failing so.
func (l *Loader) unanswered() time.Duration {
	l.downMu.Lock()
	defer l.downMu.Unlock()
	if l.down.IsZero() {
		l.down = time.Now()
	}
	return time.Since(l.down)
}

// outage returns when writes began failing for want of an answer, and
// whether they still are.
func (l *Loader) outage() (since time.Time, down bool) {
	l.downMu.Lock()
	defer l.downMu.Unlock()
	return l.down, !l.down.IsZero()
}

// answered records a write the store answered.
func (l *Loader) answered() {
	l.downMu.Lock()
	l.down = time.Time{}
	l.downMu.Unlock()
}

// write puts or deletes items in one transaction and counts the outcome.
func (l *Loader) write(ctx context.Context, items []item) error {
	changes := make([]webindex.Change, len(items))
	err := l.db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		// Update runs this again after a conflict: every change is
		// recomputed from the new snapshot.
		for i, it := range items {
			var err error
			if it.rec.Delete {
				changes[i], err = l.pages.DeleteCanonical(ctx, tx, it.url)
			} else {
				changes[i], err = l.pages.PutCanonical(ctx, tx, it.url, it.page)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", it.url, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, c := range changes {
		switch c {
		case webindex.Added:
			l.c.loaded.Add(1)
		case webindex.Replaced:
			l.c.replaced.Add(1)
		case webindex.Deleted:
			l.c.deleted.Add(1)
		default:
			l.c.unchanged.Add(1)
		}
	}
	return nil
}

// Concat yields the records and errors of each source in turn. Unlike a
// single source, it goes on with the next source after one ends with a
// fatal error, so one unreadable file does not stop a run over many.
func Concat(srcs ...iter.Seq2[input.Record, error]) iter.Seq2[input.Record, error] {
	return func(yield func(input.Record, error) bool) {
		for _, src := range srcs {
			for rec, err := range src {
				if !yield(rec, err) {
					return
				}
			}
		}
	}
}
