package scanner

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/trickle-dev/trickle/internal/percolator"
)

// Row names a row of a table that just received a notification; see Hint.
type Row = percolator.NotifiedRow

// maxHints bounds the rows waiting to be looked at. Past it, Hint drops
// rows and wakes the scanning goroutines instead: a pass finds them.
const maxHints = 4096

// hints holds the rows Hint was given until a scanning goroutine takes
// them.
type hints struct {
	rows   []Row
	queued map[rowKey]bool
	// ready holds a token once Hint added rows, so that one idle
	// scanning goroutine wakes to take them (a busy one may have taken
	// them first, between passes).
	ready chan struct{}
}

type rowKey struct{ table, row string }

// Hint tells the scanner that rows just received notifications (committed
// in this process, or announced by another), so that it looks at those
// rows at once: one seek each, where finding them by a pass means stepping
// over every pending notification and every one removed since the store
// last compacted them. A pass still follows every IdleWait, and finds
// anything no hint named; a hint for a row whose notifications are gone,
// or in flight, costs one seek. Rows are copied. It never blocks.
func (s *Scanner) Hint(rows ...Row) {
	dropped := false
	s.mu.Lock()
	for _, r := range rows {
		k := rowKey{r.Table, string(r.Row)}
		if s.hints.queued[k] {
			continue
		}
		if len(s.hints.rows) >= maxHints {
			dropped = true
			break
		}
		s.hints.queued[k] = true
		s.hints.rows = append(s.hints.rows, Row{Table: r.Table, Row: slices.Clone(r.Row)})
	}
	s.mu.Unlock()
	if dropped {
		s.stats.HintsDropped.Add(1)
		s.Wake()
	}
	select {
	case s.hints.ready <- struct{}{}:
	default:
	}
}

// Notified is a percolator.Options.Notified hook for this scanner: it
// hints the rows a commit notified, or wakes the scanning goroutines when
// the commit named none (it notified too many).
func (s *Scanner) Notified(rows []Row) {
	if len(rows) == 0 {
		s.Wake()
		return
	}
	s.Hint(rows...)
}

// takeHints returns the hinted rows, in key order, and forgets them.
func (s *Scanner) takeHints() []Row {
	s.mu.Lock()
	rows := s.hints.rows
	s.hints.rows = nil
	clear(s.hints.queued)
	s.mu.Unlock()
	slices.SortFunc(rows, func(a, b Row) int {
		if c := strings.Compare(a.Table, b.Table); c != 0 {
			return c
		}
		return bytes.Compare(a.Row, b.Row)
	})
	return rows
}

// runHints dispatches the notifications of the hinted rows, and reports
// whether there were any: new work was announced. A row whose advisory
// lock another holder has is left to the holder or to a pass.
func (s *Scanner) runHints(ctx context.Context) (hinted bool) {
	for _, r := range s.takeHints() {
		if ctx.Err() != nil {
			return hinted
		}
		hinted = true
		s.stats.Hinted.Add(1)
		s.scanRange(ctx, r.Table, r.Row, append(slices.Clip(r.Row), 0))
	}
	return hinted
}

// idle waits for d, ctx or wake, whichever comes first, looking at hinted
// rows as they come. It reports whether it was woken or given hints: new
// work was announced.
func (s *Scanner) idle(ctx context.Context, d time.Duration, wake <-chan struct{}) (announced bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return announced
		case <-t.C:
			return announced
		case <-wake:
			return true
		case <-s.hints.ready:
			announced = s.runHints(ctx) || announced
		}
	}
}
