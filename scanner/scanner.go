// Package scanner finds dirty cells — pending notifications — and hands
// them to a worker pool that runs their observers.
//
// Each Scanner runs several scanning goroutines over the notify locality
// group only (a scan never reads the much larger default group). Each starts
// at a random tablet and a random key in it, scans forward and wraps around.
// Before dispatching a row it takes an advisory lock on the row (a NATS key
// in multi-process deployments) so that scanners do not run the same work
// twice; the lock is only an optimization — the observer's ack column is
// what guarantees at most one commit per notification. A scanner that finds
// the row it wants locked has caught up with another scanner, and jumps to a
// new random position instead of trailing behind it (anti-clumping).
package scanner

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/internal/retry"
)

// Processor finds notifications and runs the observer of one
// (notify.Processor, on the engine it runs on; tests give fakes).
type Processor interface {
	// Find yields the pending notifications of table whose rows are in
	// [start, end) (nil: unbounded), in row order; one that does not
	// decode is an error matching notify.ErrUndecodable and the sequence
	// goes on.
	Find(ctx context.Context, table string, start, end []byte) iter.Seq2[notify.Notification, error]
	Process(ctx context.Context, n notify.Notification) (notify.Outcome, error)
}

// RowLocker takes cheap advisory locks on rows. TryLock reports ok=false,
// not an error, when another holder has the row.
type RowLocker interface {
	TryLock(ctx context.Context, table string, row []byte) (release func(), ok bool, err error)
}

// FailureSink records notifications whose observer keeps failing, where a
// status command can see them (framework.DB).
type FailureSink interface {
	RecordFailure(ctx context.Context, f notify.Failure) error
	ClearFailure(ctx context.Context, n notify.Notification) error
}

// Options configure a Scanner. EnsureDefaults fills unset fields.
type Options struct {
	// Tables returns the tables to scan (those with observed columns).
	// Required.
	Tables func() []string
	// Scanners is the number of scanning goroutines. Default: 4.
	Scanners int
	// Concurrency bounds the observer transactions in flight. Default: 16.
	Concurrency int
	// Tablets is how many contiguous key ranges a table's notifications are
	// split into when choosing random starting points. Default: 16.
	Tablets int
	// IdleWait is the pause after a pass found nothing. Default: 100ms.
	IdleWait time.Duration
	// MaxIdleWait bounds the pause of a scanner that keeps finding
	// nothing: each empty pass doubles it, from IdleWait up to MaxIdleWait,
	// and a pass that hands out work no hint named, or a Wake, brings it
	// back to IdleWait. New work is announced by wake-ups and hints, and
	// hinted rows are looked at as they come, also during a pause, as are
	// the rows of failed notifications when their backoff ends; passes
	// find what nobody announced (writers that cannot wake scanners, work
	// left by a crash), so an idle deployment polls its store 16 times
	// less (on TiKV, passes were most of an idle runner's requests), and
	// so does a busy one whose work hints name. Default: 16 × IdleWait.
	MaxIdleWait time.Duration
	// RetryMin and RetryMax bound the exponential backoff before a failing
	// notification is tried again. Defaults: 200ms and 5m.
	RetryMin, RetryMax time.Duration
	// Locks takes advisory row locks. Default: locks local to this process.
	Locks RowLocker
	// Failures records failing notifications. Default: nil (not recorded).
	Failures FailureSink
	// Observer names the observer of a notification in failure records.
	// Default: nil (left empty).
	Observer func(notify.Notification) string
	// Logger receives diagnostics. Default: slog.Default().
	Logger *slog.Logger
	// MeterProvider receives the scanner's metrics (see metrics.go).
	// Default: the global provider (otel.GetMeterProvider).
	MeterProvider metric.MeterProvider
	// Delay returns how long a notification is held back after this
	// scanner first finds it, so that the changes arriving meanwhile are
	// dealt with by one run (see delay.go): framework.Observer.Delay of
	// its observer. Default: nil, none.
	Delay func(notify.Notification) time.Duration
}

// EnsureDefaults fills unset fields and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Scanners == 0 {
		o.Scanners = 4
	}
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.Tablets == 0 {
		o.Tablets = 16
	}
	if o.IdleWait == 0 {
		o.IdleWait = 100 * time.Millisecond
	}
	if o.MaxIdleWait == 0 {
		o.MaxIdleWait = 16 * o.IdleWait
	}
	if o.RetryMin == 0 {
		o.RetryMin = 200 * time.Millisecond
	}
	if o.RetryMax == 0 {
		o.RetryMax = 5 * time.Minute
	}
	if o.Locks == nil {
		o.Locks = NewLocalLocks()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	return o
}

// Validate reports the first unusable field.
func (o *Options) Validate() error {
	switch {
	case o.Tables == nil:
		return errors.New("scanner: Options.Tables is required")
	case o.Scanners < 1 || o.Concurrency < 1 || o.Tablets < 1:
		return errors.New("scanner: Scanners, Concurrency and Tablets must be at least 1")
	case o.IdleWait <= 0 || o.RetryMin <= 0 || o.RetryMax < o.RetryMin:
		return errors.New("scanner: IdleWait and RetryMin must be positive, RetryMax >= RetryMin")
	case o.MaxIdleWait < o.IdleWait:
		return fmt.Errorf("scanner: MaxIdleWait (%v) must be at least IdleWait (%v)", o.MaxIdleWait, o.IdleWait)
	}
	return nil
}

// Stats counts what the scanner did; all fields only grow.
type Stats struct {
	Found      atomic.Uint64 // notifications seen by scans
	Dispatched atomic.Uint64 // notifications handed to the pool
	// Unhinted counts the notifications passes handed to the pool on rows
	// no pending hint named, and that were still pending when their
	// observer came to run: work only a pass would have found.
	Unhinted  atomic.Uint64
	Ran       atomic.Uint64 // observer transactions committed
	Skipped   atomic.Uint64 // processed with nothing to do
	Failed    atomic.Uint64 // observer runs that failed
	Jumps     atomic.Uint64 // anti-clumping jumps to a new random position
	Contended atomic.Uint64 // rows whose advisory lock another holder had
	Passes    atomic.Uint64 // scans that reached their starting point again
	Pauses    atomic.Uint64 // idle pauses: a pass found nothing to hand out
	// Paused sums the length of those pauses before jitter, in
	// nanoseconds: with Pauses, how long an idle scanner waits now.
	Paused atomic.Uint64
	// Hinted counts rows looked at because Hint named them.
	Hinted atomic.Uint64
	// Named counts the notifications dispatched as a hint named them,
	// without reading the row's notifications first.
	Named atomic.Uint64
	// Held counts the looks at hinted rows that found them busy: a
	// notification in flight here, or the row's lock held by another.
	Held atomic.Uint64
	// HintsDropped counts Hint calls that found the queue of hinted rows
	// full and woke the scanning goroutines instead.
	HintsDropped atomic.Uint64
}

// Scanner scans for notifications and runs them through a Processor.
type Scanner struct {
	p     Processor
	opts  Options
	stats Stats

	sem chan struct{}
	wg  sync.WaitGroup

	mu       sync.Mutex
	inflight map[string]bool
	retry    map[string]*retryState
	// delayed holds when each notification held back for its observer's
	// delay was first found (see delay.go).
	delayed map[string]time.Time
	clock   clock
	tablets map[string]*tabletCache
	// lastPass is how many notifications the latest full pass over each
	// table found: the backlog, as the pending gauge reports it.
	lastPass map[string]int
	// wake is closed (and replaced) by Wake to end every idle pause.
	wake chan struct{}
	// hints are the rows Hint named, guarded by mu (but for ready).
	hints hints
	// jobs feeds Run's workers; a dispatch holds a place in sem first, so
	// a worker is always free to take it.
	jobs chan func()
}

type retryState struct {
	attempts int
	first    time.Time
	next     time.Time
}

// New returns a Scanner reading notifications from st.
func New(p Processor, opts *Options) (*Scanner, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &Scanner{
		p: p, opts: o,
		sem:      make(chan struct{}, o.Concurrency),
		inflight: map[string]bool{},
		retry:    map[string]*retryState{},
		delayed:  map[string]time.Time{},
		clock:    realClock{},
		tablets:  map[string]*tabletCache{},
		lastPass: map[string]int{},
		wake:     make(chan struct{}),
		hints:    hints{queued: map[rowKey]*Row{}, held: map[rowKey]heldRow{}, ready: make(chan struct{}, 1)},
	}
	if err := s.registerMetrics(); err != nil {
		o.Logger.Warn("scanner metrics unavailable", "err", err)
	}
	return s, nil
}

// Wake ends the idle pause of every scanning goroutine, so that a
// notification just written is found now rather than up to MaxIdleWait
// later.
// Call it after notifications were committed where it is not known which
// rows they are in (Hint names the rows, and costs less). It never
// blocks.
func (s *Scanner) Wake() {
	s.mu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

func (s *Scanner) wakeChan() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wake
}

// Stats returns the scanner's counters.
func (s *Scanner) Stats() *Stats { return &s.stats }

// Run scans until ctx ends, then waits for the observer transactions in
// flight and returns nil.
func (s *Scanner) Run(ctx context.Context) error {
	// Long-lived workers run the observers: a fresh goroutine per
	// notification would grow its stack anew for every transaction.
	s.jobs = make(chan func())
	var workers sync.WaitGroup
	for range s.opts.Concurrency {
		workers.Go(func() {
			for job := range s.jobs {
				job()
			}
		})
	}
	defer workers.Wait()
	defer close(s.jobs)
	var scanners sync.WaitGroup
	for i := range s.opts.Scanners {
		scanners.Add(1)
		go func() {
			defer scanners.Done()
			s.scanLoop(ctx, uint64(i))
		}()
	}
	scanners.Wait()
	s.wg.Wait()
	return nil
}

func notificationKey(n notify.Notification) string {
	return fmt.Sprintf("%d:%s%d:%s%s", len(n.Table), n.Table, len(n.Row), n.Row, n.Column)
}

// due reports whether n may be dispatched now: not in flight here (which
// inflight reports), not waiting out a retry backoff and not held back for
// its observer's delay.
func (s *Scanner) due(n notify.Notification, now time.Time) (due, inflight bool) {
	k := notificationKey(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight[k] {
		return false, true
	}
	if r, ok := s.retry[k]; ok && now.Before(r.next) {
		return false, false
	}
	return !s.heldBack(k, n, s.clock.Now()), false
}

// dispatch runs the notifications of one row in the pool, holding the row's
// advisory lock. It reports false if the row is locked by someone else.
// With unhinted (the tally of the pass that found them, when no hint
// names the row), those still pending count there and in Stats.Unhinted.
func (s *Scanner) dispatch(ctx context.Context, table string, row []byte, ns []notify.Notification, unhinted *passTally) (bool, error) {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return true, ctx.Err()
	}
	release, ok, err := s.opts.Locks.TryLock(ctx, table, row)
	if err != nil || !ok {
		<-s.sem
		if err == nil {
			s.stats.Contended.Add(1)
		}
		return ok, err
	}
	s.mu.Lock()
	for _, n := range ns {
		s.inflight[notificationKey(n)] = true
	}
	s.mu.Unlock()
	s.stats.Dispatched.Add(uint64(len(ns)))
	s.wg.Add(1)
	s.jobs <- func() {
		defer s.wg.Done()
		defer func() { <-s.sem }()
		defer func() {
			release()
			s.released(table, row)
		}()
		for _, n := range ns {
			if s.process(ctx, n) && unhinted != nil {
				unhinted.pending.Add(1)
				s.stats.Unhinted.Add(1)
			}
		}
	}
	return true, nil
}

// process runs n's observer and reports whether n was still pending (a
// pass's snapshot may show a notification settled since).
func (s *Scanner) process(ctx context.Context, n notify.Notification) (pending bool) {
	k := notificationKey(n)
	out, err := s.p.Process(ctx, n)
	pending = err != nil || out != notify.OutcomeNone
	s.mu.Lock()
	delete(s.inflight, k)
	s.ranDelayed(k)
	r := s.retry[k]
	if err == nil {
		delete(s.retry, k)
	} else if ctx.Err() == nil {
		if r == nil {
			r = &retryState{first: time.Now()}
			s.retry[k] = r
		}
		r.attempts++
		r.next = time.Now().Add(retry.Backoff(r.attempts, s.opts.RetryMin, s.opts.RetryMax))
	}
	var rs retryState
	if r != nil {
		rs = *r
	}
	s.mu.Unlock()

	switch {
	case err != nil && ctx.Err() != nil:
		return false // shutting down; the notification stays for later
	case err != nil:
		s.stats.Failed.Add(1)
		// Looked at again when the backoff ends, rather than by the
		// first pass after it: passes back off while hints name the work.
		row := Row{Table: n.Table, Row: n.Row, Columns: []Column{n.Column}}
		time.AfterFunc(time.Until(rs.next), func() { s.Hint(row) })
		// Logged with the failed run's span context, so that the line
		// carries its trace id.
		lctx := trace.ContextWithSpanContext(ctx, notify.SpanContextOf(err))
		s.opts.Logger.WarnContext(lctx, "observer failed; will retry", "notification", n.String(), "attempts", rs.attempts, "retry_at", rs.next, "err", err)
		if s.opts.Failures != nil {
			f := notify.Failure{Notification: n, Attempts: rs.attempts, LastError: err.Error(), FirstAt: rs.first, LastAt: time.Now(), NextRetry: rs.next}
			if s.opts.Observer != nil {
				f.Observer = s.opts.Observer(n)
			}
			if ferr := s.opts.Failures.RecordFailure(ctx, f); ferr != nil {
				s.opts.Logger.Warn("recording failure", "err", ferr)
			}
		}
	case out == notify.OutcomeRan:
		s.stats.Ran.Add(1)
	default:
		s.stats.Skipped.Add(1)
	}
	if err == nil && r != nil && s.opts.Failures != nil {
		if ferr := s.opts.Failures.ClearFailure(ctx, n); ferr != nil {
			s.opts.Logger.Warn("clearing failure record", "err", ferr)
		}
	}
	return pending
}

// localLocks are advisory row locks within one process.
type localLocks struct {
	mu   sync.Mutex
	held map[string]bool
}

// NewLocalLocks returns advisory row locks held within this process, the
// default Options.Locks: enough for the scanners of one process, and what
// a lock shared with other processes (a NATS key) is taken on top of, so
// that rows busy here cost no round trip.
func NewLocalLocks() RowLocker { return &localLocks{held: map[string]bool{}} }

func (l *localLocks) TryLock(_ context.Context, table string, row []byte) (func(), bool, error) {
	k := fmt.Sprintf("%d:%s%s", len(table), table, row)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[k] {
		return nil, false, nil
	}
	l.held[k] = true
	return func() {
		l.mu.Lock()
		delete(l.held, k)
		l.mu.Unlock()
	}, true, nil
}
