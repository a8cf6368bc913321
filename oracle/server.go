package oracle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// MaxReserve is the largest n a single Reserve call may ask for. It bounds
// how far one caller can push the oracle ahead of the clock (2^16 timestamps
// are a quarter of one millisecond's logical space) and catches callers that
// pass garbage counts.
const MaxReserve = 1 << 16

// Default values of the Server options.
const (
	// DefaultWindow is how far ahead of the current physical time each
	// persisted reservation reaches: one Save per DefaultWindow of traffic,
	// and at most this much physical time skipped by a restart.
	DefaultWindow = 3 * time.Second
	// MaxWindow bounds ServerOptions.Window: each restart may skip up to a window of
	// timestamp space, and the physical part of timestamps may run up to a
	// window ahead of the wall clock right after a restart.
	MaxWindow = time.Hour
)

// Errors returned by Server, Client and FilePersister. Callers match them
// with errors.Is; the returned errors carry detail around them.
var (
	// ErrClosed is returned by Reserve and Timestamp after Close, so callers
	// can tell shutdown apart from a failure.
	ErrClosed = errors.New("oracle: closed")
	// ErrExhausted is returned when serving would exceed MaxTimestamp;
	// nothing is served and the oracle cannot make progress any more.
	ErrExhausted = errors.New("oracle: timestamp space exhausted")
	// ErrInvalidCount is returned for n <= 0 or n > MaxReserve.
	ErrInvalidCount = errors.New("oracle: invalid timestamp count")
)

// Server is the in-process timestamp oracle. It serves strictly increasing
// timestamps that track the wall clock but never go backwards, and it never
// serves a timestamp above the top last saved through its Persister, so a
// restarted Server (which resumes above the saved top) never repeats one.
//
// The hot path is lock-free: one CAS on next, checked against the atomic
// persisted limit. Only a request that would cross the limit takes the slow
// path, which persists a new top under a one-slot semaphore. When a served
// range gets close to the limit, a background goroutine extends the limit
// early so that callers rarely wait for Save.
//
// A Persister must be used by at most one Server at a time.
type Server struct {
	// next is the smallest timestamp that may still be served; limit the
	// persisted top (inclusive). Both only grow.
	next  atomic.Uint64
	limit atomic.Uint64

	// issued counts timestamps served, so that an observer of the oracle
	// (e.g. a "wait until idle" check) can tell whether anyone drew one.
	issued atomic.Uint64

	closed      atomic.Bool
	prefetching atomic.Bool

	p        Persister
	clock    func() time.Time
	log      *slog.Logger
	window   uint64 // the window in timestamp ticks
	lowWater uint64 // prefetch when fewer ticks than this remain below limit

	// sem is a one-slot semaphore (rather than a sync.Mutex) so that callers
	// waiting for a Save can give up when their context ends.
	sem chan struct{}
}

// NewServer loads the persisted top from p and returns a Server that serves
// only timestamps above it. It does not Save until the first Reserve. opts
// may be nil (all defaults); it is copied, so the caller may reuse it. An
// unusable option fails with an *OptionError naming the field.
func NewServer(p Persister, opts *ServerOptions) (*Server, error) {
	if p == nil {
		return nil, errors.New("oracle: NewServer: nil Persister")
	}
	var cfg ServerOptions
	if opts != nil {
		cfg = *opts
	}
	if err := cfg.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	top, err := p.Load()
	if err != nil {
		return nil, fmt.Errorf("oracle: load persisted top: %w", err)
	}
	window := Compose(cfg.Window.Milliseconds(), 0)
	s := &Server{
		p:        p,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		window:   window,
		lowWater: window / 4,
		sem:      make(chan struct{}, 1),
	}
	s.limit.Store(top)
	if top >= MaxTimestamp {
		s.next.Store(MaxTimestamp + 1) // serves nothing: ErrExhausted
	} else {
		s.next.Store(top + 1)
	}
	s.log.Info("oracle: server started", "persisted_top", top, "persisted_physical", Physical(top))
	return s, nil
}

// now returns the smallest timestamp of the clock's current millisecond,
// clamped to [0, MaxTimestamp] so that a broken clock cannot wrap around.
func (s *Server) now() uint64 {
	ms := s.clock().UnixMilli()
	if ms <= 0 {
		return 0
	}
	if uint64(ms) > MaxTimestamp>>LogicalBits {
		return MaxTimestamp
	}
	return Compose(ms, 0)
}

// Reserve returns the first of n consecutive timestamps [first, first+n),
// all strictly greater than any timestamp served before and, while the clock
// is sane, no smaller than Compose(now in ms, 0).
//
// Timestamps are consecutive integers, so a burst of more than 2^LogicalBits
// timestamps within one millisecond simply carries into the next
// millisecond's physical part: timestamps then run slightly ahead of the
// clock until it catches up. The same happens after the clock goes
// backwards: the oracle keeps counting from where it was.
//
// ctx is consulted only when Reserve has to wait for a Save; the fast path
// never blocks.
func (s *Server) Reserve(ctx context.Context, n int) (uint64, error) {
	if n <= 0 || n > MaxReserve {
		return 0, fmt.Errorf("%w: %d (must be 1..%d)", ErrInvalidCount, n, MaxReserve)
	}
	if s.closed.Load() {
		return 0, ErrClosed
	}
	span := uint64(n - 1)
	for {
		now := s.now()
		cur := s.next.Load()
		first := max(cur, now)
		if first > MaxTimestamp-span {
			return 0, fmt.Errorf("%w: cannot serve %d above %d", ErrExhausted, n, first)
		}
		last := first + span
		lim := s.limit.Load()
		if last > lim {
			// Nothing in (lim, last] may be served before it is persisted.
			if err := s.extend(ctx, last, last); err != nil {
				return 0, err
			}
			continue
		}
		// limit never shrinks, so last <= limit still holds at the CAS.
		if s.next.CompareAndSwap(cur, last+1) {
			s.issued.Add(uint64(n))
			if lim-last < s.lowWater {
				s.prefetch(last)
			}
			return first, nil
		}
	}
}

// extend persists a new top of last+window unless the limit already reaches
// need. Concurrent callers queue on the semaphore, and all but the first
// usually find the work done.
func (s *Server) extend(ctx context.Context, need, last uint64) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("oracle: waiting to persist: %w", ctx.Err())
	}
	defer func() { <-s.sem }()
	if s.closed.Load() {
		return ErrClosed
	}
	if s.limit.Load() >= need {
		return nil
	}
	top := MaxTimestamp
	if last < MaxTimestamp-s.window {
		top = last + s.window
	}
	if err := s.p.Save(top); err != nil {
		s.log.Error("oracle: persisting top failed", "top", top, "err", err)
		return fmt.Errorf("oracle: persist top %d: %w", top, err)
	}
	s.limit.Store(top)
	s.log.Debug("oracle: persisted top", "top", top, "physical", Physical(top))
	return nil
}

// prefetch extends the limit in the background once the served range is
// within lowWater of it, so the hot path does not stall on Save. A failure
// is only logged: the next Reserve that needs the range retries
// synchronously and reports it.
func (s *Server) prefetch(last uint64) {
	if !s.prefetching.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer s.prefetching.Store(false)
		need := MaxTimestamp
		if last < MaxTimestamp-s.lowWater {
			need = last + s.lowWater
		}
		_ = s.extend(context.Background(), need, last)
	}()
}

// Close stops the Server: later Reserve calls fail with ErrClosed, and once
// Close returns no further Save will be issued, so the Persister may be
// handed to a new Server. Close is idempotent; it does not Save anything,
// since the persisted top already covers every served timestamp.
func (s *Server) Close() error {
	s.closed.Store(true)
	s.sem <- struct{}{} // wait for an in-progress Save
	<-s.sem
	return nil
}

// Timestamp returns one fresh timestamp. In-process callers use it directly:
// the server's fast path is a lock-free compare-and-swap, cheaper than the
// hand-off a coalescing Client needs, which only pays off across a network.
func (s *Server) Timestamp(ctx context.Context) (uint64, error) { return s.Reserve(ctx, 1) }

// Issued returns how many timestamps the server has served since it started.
func (s *Server) Issued() uint64 { return s.issued.Load() }

// Position returns the last timestamp served (or, before the first one, the
// persisted top the server started above) and the persisted limit.
func (s *Server) Position() (last, limit uint64) { return s.next.Load() - 1, s.limit.Load() }
