package scanner

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/internal/retry"
)

// tabletRefresh is how long a table's tablet boundaries are reused.
const tabletRefresh = 5 * time.Second

// maxSample bounds the rows sampled to split a table into tablets.
const maxSample = 4096

// tabletCache holds a sample of a table's notified rows, split into
// contiguous tablets.
type tabletCache struct {
	at   time.Time
	rows [][]byte
}

// scanLoop is one scanning goroutine.
func (s *Scanner) scanLoop(ctx context.Context, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	pause := s.opts.IdleWait
	for ctx.Err() == nil {
		s.runHints(ctx)
		tables := s.opts.Tables()
		if len(tables) == 0 {
			retry.Sleep(ctx, s.opts.IdleWait)
			continue
		}
		table := tables[rng.IntN(len(tables))]
		start := s.randomStart(ctx, table, rng)
		// Taken before the pass, so that a Wake during it is not lost.
		wake := s.wakeChan()
		tally := new(passTally)
		jumped := s.scanFrom(ctx, table, start, tally)
		if tally.pending.Load() > 0 || jumped && tally.unhinted > 0 {
			pause = s.opts.IdleWait
			continue
		}
		// Nothing to hand out that a hint had not named: none found, all
		// in flight or waiting to be retried, or all on hinted rows.
		// A pass that jumped away from a row another holder had (see
		// package doc) goes on at once if it handed out rows no hint
		// named, as when it works through a backlog with other scanners;
		// otherwise that holder is most likely running a hint.
		// Pause until woken, looking at hinted rows meanwhile; jitter
		// keeps idle scanners from polling in lockstep. While hints name
		// the work, passes back off as if idle: each steps over every
		// notification removed since the store last compacted them, and
		// one right behind the hints only finds what they name.
		s.stats.Paused.Add(uint64(pause)) // before Pauses: a reader of both never misses a counted pause's length
		s.stats.Pauses.Add(1)
		woken := s.idle(ctx, pause/2+time.Duration(rng.Int64N(int64(pause))), wake)
		// The pass's last observers may have run during the pause, and
		// found their notifications still pending.
		found := tally.pending.Load() > 0
		pause = nextPause(pause, woken || found, s.opts.IdleWait, s.opts.MaxIdleWait)
	}
}

// nextPause is the pause after an empty pass that followed a pause of cur:
// double, up to max, unless the scanner was woken meanwhile (back to
// base).
func nextPause(cur time.Duration, woken bool, base, max time.Duration) time.Duration {
	if woken {
		return base
	}
	return min(2*cur, max)
}

// randomStart picks a random tablet of table and a random key in it.
func (s *Scanner) randomStart(ctx context.Context, table string, rng *rand.Rand) []byte {
	rows := s.sample(ctx, table)
	if len(rows) == 0 {
		return nil
	}
	tablets := min(s.opts.Tablets, len(rows))
	t := rng.IntN(tablets)
	lo, hi := t*len(rows)/tablets, (t+1)*len(rows)/tablets
	return rows[lo+rng.IntN(hi-lo)]
}

// sample returns the sorted sample of notified rows of table, refreshing it
// when stale.
func (s *Scanner) sample(ctx context.Context, table string) [][]byte {
	s.mu.Lock()
	tc := s.tablets[table]
	s.mu.Unlock()
	if tc != nil && time.Since(tc.at) < tabletRefresh {
		return tc.rows
	}
	var rows [][]byte
	for n, err := range s.p.Find(ctx, table, nil, nil) {
		if err != nil && !errors.Is(err, notify.ErrUndecodable) {
			s.opts.Logger.Warn("sampling notifications", "table", table, "err", err)
			break
		}
		if len(rows) > 0 && bytes.Equal(rows[len(rows)-1], n.Row) {
			continue
		}
		// Reservoir-free thinning: keep every row until the sample is full,
		// then every other one, so the sample stays spread over the table.
		if len(rows) >= maxSample {
			kept := rows[:0]
			for i := 0; i < len(rows); i += 2 {
				kept = append(kept, rows[i])
			}
			rows = kept
		}
		rows = append(rows, n.Row)
	}
	s.mu.Lock()
	s.tablets[table] = &tabletCache{at: time.Now(), rows: rows}
	s.mu.Unlock()
	return rows
}

// passTally counts what a pass handed out.
type passTally struct {
	found int // notifications seen
	// unhinted counts the rows handed out that no pending hint named
	// (some may turn out settled: a pass reads a snapshot).
	unhinted int
	// pending counts the notifications of those rows that were still
	// pending when their observer ran; the pool adds to it after the
	// pass may have ended.
	pending atomic.Int64
}

// scanFrom scans table's notifications from start to the end, then from
// the beginning up to start, counting in t. It reports whether it jumped
// away because it caught up with another scanner.
func (s *Scanner) scanFrom(ctx context.Context, table string, start []byte, t *passTally) (jumped bool) {
	began := time.Now()
	jumped, _ = s.scanRange(ctx, table, start, nil, t)
	if jumped || ctx.Err() != nil {
		return jumped
	}
	if start == nil {
		s.passed(table, began)
		return false
	}
	jumped, _ = s.scanRange(ctx, table, nil, start, t)
	s.stats.Passes.Add(1)
	if !jumped && ctx.Err() == nil {
		s.mu.Lock()
		s.lastPass[table] = t.found
		s.mu.Unlock()
		s.passed(table, began)
	}
	return jumped
}

// scanRange dispatches the notifications of rows in [start, end), row by
// row. A pass counts in t (nil for a hint's look at one row), and in
// Stats.Unhinted, what it hands out on rows no pending hint names (see
// dispatch). It reports whether it jumped away from a row another holder
// had, and busy when it left a notification because this scanner has it
// in flight, or a row because another holder had it.
func (s *Scanner) scanRange(ctx context.Context, table string, start, end []byte, t *passTally) (jumped, busy bool) {
	var row []byte
	var pending []notify.Notification
	now := time.Now()
	flush := func() bool {
		if len(pending) == 0 {
			return true
		}
		var unhinted *passTally
		if t != nil && !s.hinted(table, row) {
			unhinted = t
		}
		ok := s.dispatchRow(ctx, table, row, pending, unhinted)
		pending = nil
		if !ok {
			busy = true
			return false
		}
		if unhinted != nil {
			t.unhinted++
		}
		return true
	}
	for n, err := range s.p.Find(ctx, table, start, end) {
		if errors.Is(err, notify.ErrUndecodable) {
			s.opts.Logger.Warn("skipping a notification", "err", err)
			continue
		}
		if err != nil {
			if ctx.Err() == nil {
				s.opts.Logger.Warn("scanning notifications", "table", table, "err", err)
			}
			return false, busy
		}
		if row != nil && !bytes.Equal(row, n.Row) {
			if !flush() {
				return true, busy
			}
		}
		row = n.Row
		if t != nil {
			t.found++
		}
		s.stats.Found.Add(1)
		switch due, inflight := s.due(n, now); {
		case due:
			pending = append(pending, n)
		case inflight:
			busy = true
		}
	}
	if !flush() {
		return true, busy
	}
	return false, busy
}

// dispatchRow dispatches the notifications ns of row (see dispatch),
// logging an error. It reports false if another holder had the row's
// lock, which counts as a jump away from it.
func (s *Scanner) dispatchRow(ctx context.Context, table string, row []byte, ns []notify.Notification, unhinted *passTally) bool {
	ok, err := s.dispatch(ctx, table, row, ns, unhinted)
	if err != nil {
		if ctx.Err() == nil {
			s.opts.Logger.Warn("dispatching notifications", "table", table, "err", err)
		}
		return true
	}
	if !ok {
		s.stats.Jumps.Add(1)
	}
	return ok
}
