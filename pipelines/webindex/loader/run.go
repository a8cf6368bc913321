package loader

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"iter"
	"maps"
	"sync"
	"time"

	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// Run reads src to the end and loads its records, then waits for the
// transactions in flight. Records are parsed and written by
// Options.Concurrency goroutines, in transactions of up to
// Options.BatchSize records; every URL is always handled by the same
// goroutine, so the records of one URL are applied in input order (a later
// record wins, also within a batch). A batch that does not fill up is
// written after about Options.FlushInterval, so a slow stream of records
// (a feed on stdin) is loaded as it comes.
//
// Errors from src do not stop the run: a *input.BadRecord is counted as bad
// and reported, any other error is counted as an input error and reported,
// and reading continues (see Concat). Nor does a failed transaction: its
// records are retried one per transaction, so that only the records that
// cannot be written fail. Every problem goes to Options.OnProblem.
//
// Run returns an error only when ctx ends (the Summary then counts the
// records left unwritten as abandoned) or when called twice. It returns
// once src has yielded its next value after ctx ended: a source blocked in
// a read (stdin) holds it up until the read returns.
func (l *Loader) Run(ctx context.Context, src iter.Seq2[input.Record, error]) (Summary, error) {
	if !l.ran.CompareAndSwap(false, true) {
		return Summary{}, errors.New("loader: Run called twice")
	}
	if l.opts.Bulk {
		return l.runBulk(ctx, src)
	}
	began := time.Now()
	ctx, l.stop = context.WithCancelCause(ctx)
	defer l.stop(nil)

	in := l.readSource(src)
	wctx, cancelWrites := l.writeContext(ctx)
	defer cancelWrites()
	out := l.startWriters(ctx, wctx)
	l.dispatch(ctx, in, out)
	out.finish(ctx)
	return l.runSummary(ctx, began, in.skipReasons)
}

// yielded is one value the source yielded.
type yielded struct {
	rec input.Record
	err error
}

// sourceFeed is the source running on a goroutine of its own, so that
// partial batches can be flushed while it blocks in a read. Only that
// goroutine touches Options.Stats.
type sourceFeed struct {
	// recs carries what the source yields; it is closed when the source
	// ends or is stopped.
	recs <-chan yielded
	// stop, closed, makes the goroutine return at its next yield.
	stop chan struct{}
	// skipReasons are the sources' skip reasons at the end, published by
	// the close of recs.
	skipReasons map[string]int64
}

// readSource starts ranging over src on a goroutine of its own.
func (l *Loader) readSource(src iter.Seq2[input.Record, error]) *sourceFeed {
	recs := make(chan yielded, l.opts.BatchSize)
	in := &sourceFeed{recs: recs, stop: make(chan struct{})}
	go func() {
		defer func() {
			l.syncSkipped()
			if l.opts.Stats != nil {
				in.skipReasons = maps.Clone(l.opts.Stats.Skipped)
			}
			close(recs) // publishes skipReasons to the receiver
		}()
		for rec, err := range src {
			l.syncSkipped()
			select {
			case recs <- yielded{rec, err}:
			case <-in.stop:
				return
			}
		}
	}()
	return in
}

// writeContext returns the context the transactions run under, which
// outlives ctx by StopGrace (not at all if StopGrace is negative), so
// that the writes under way when the run stops may finish; and the
// function that releases it.
func (l *Loader) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	wctx, cancelWrites := context.WithCancel(context.WithoutCancel(ctx))
	grace := func() { time.AfterFunc(l.opts.StopGrace, cancelWrites) }
	if l.opts.StopGrace < 0 {
		grace = cancelWrites
	}
	stopGrace := context.AfterFunc(ctx, grace)
	return wctx, func() {
		stopGrace()
		cancelWrites()
	}
}

// writers are the Options.Concurrency goroutines that parse and write
// batches, each with its own partition of the URLs, so that the records
// of one URL are written in input order. pending holds the batch each
// partition is filling, born when it got its first record.
type writers struct {
	parts   []chan *batch
	wg      sync.WaitGroup
	pending []*batch
	born    []time.Time
	l       *Loader
}

// startWriters starts the writers; no transaction starts once ctx has
// ended, those started run under wctx.
func (l *Loader) startWriters(ctx, wctx context.Context) *writers {
	n := l.opts.Concurrency
	w := &writers{parts: make([]chan *batch, n), pending: make([]*batch, n), born: make([]time.Time, n), l: l}
	for i := range w.parts {
		w.parts[i] = make(chan *batch, 1)
		w.wg.Go(func() {
			for b := range w.parts[i] {
				l.process(ctx, wctx, b)
			}
		})
	}
	return w
}

// add puts it, whose record's body has size bytes, into the pending
// batch of its URL's partition, and sends the batch once it is full.
func (w *writers) add(ctx context.Context, it item, size int64) {
	i := int(maphash.String(w.l.seed, it.url.String()) % uint64(len(w.parts)))
	if w.pending[i] == nil {
		w.pending[i] = &batch{items: make([]item, 0, w.l.opts.BatchSize)}
		w.born[i] = time.Now()
	}
	b := w.pending[i]
	b.items = append(b.items, it)
	b.bytes += size
	if len(b.items) >= w.l.opts.BatchSize || b.bytes >= w.l.opts.BatchBytes {
		w.send(ctx, i)
	}
}

// flushOlder sends the pending batches that got their first record a
// FlushInterval or more before now.
func (w *writers) flushOlder(ctx context.Context, now time.Time) {
	for i := range w.pending {
		if w.pending[i] != nil && now.Sub(w.born[i]) >= w.l.opts.FlushInterval {
			w.send(ctx, i)
		}
	}
}

// send hands partition i's pending batch, if any, to its writer, or
// counts it abandoned if ctx ends first.
func (w *writers) send(ctx context.Context, i int) {
	b := w.pending[i]
	w.pending[i] = nil
	if b == nil {
		return
	}
	select {
	case w.parts[i] <- b:
	case <-ctx.Done():
		w.l.c.abandoned.Add(int64(len(b.items)))
	}
}

// finish sends the pending batches and waits for the writers to write
// everything they were sent.
func (w *writers) finish(ctx context.Context) {
	for i := range w.pending {
		w.send(ctx, i)
		close(w.parts[i])
	}
	w.wg.Wait()
}

// dispatch hands the source's records to the writers until the source
// ends: each goes, normalized, into its partition's pending batch, and a
// batch that does not fill up is sent after about FlushInterval. Errors
// the source yields are counted and reported. When ctx ends, dispatch
// stops the source and counts what it still yields as abandoned (the
// batches not written yet are counted by send and process, which check
// ctx).
func (l *Loader) dispatch(ctx context.Context, in *sourceFeed, out *writers) {
	var tick <-chan time.Time
	if l.opts.FlushInterval > 0 {
		t := time.NewTicker(l.opts.FlushInterval)
		defer t.Stop()
		tick = t.C
	}
	done := ctx.Done()
	cancelled := false
	for {
		select {
		case y, ok := <-in.recs:
			switch {
			case !ok:
				return
			case y.err != nil:
				l.sourceError(y.err)
				continue
			}
			l.c.read.Add(1)
			if cancelled {
				l.c.abandoned.Add(1)
				continue
			}
			norm, err := extract.NormalizeURL(y.rec.URL)
			if err != nil {
				l.bad(y.rec, "", err)
				continue
			}
			out.add(ctx, item{rec: y.rec, url: norm}, int64(len(y.rec.Body)))
		case now := <-tick:
			out.flushOlder(ctx, now)
		case <-done:
			cancelled, done = true, nil
			close(in.stop)
		}
	}
}

// runSummary is the Summary of a run that began at began, and its error if
// ctx ended.
func (l *Loader) runSummary(ctx context.Context, began time.Time, skipReasons map[string]int64) (Summary, error) {
	s := l.summary(began)
	s.SkipReasons = skipReasons // the source's goroutine's copy
	if n := l.c.symlinks.Load(); n > 0 {
		if s.SkipReasons == nil {
			s.SkipReasons = map[string]int64{}
		}
		s.SkipReasons[ReasonSymlink] += n
	}
	if err := context.Cause(ctx); err != nil {
		return s, fmt.Errorf("loader: stopped with %d records read but not loaded: %w", s.Abandoned, err)
	}
	return s, nil
}
