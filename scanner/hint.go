package scanner

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/store"
)

// Row names a row of a table that just received a notification, and the
// notified columns if known; see Hint.
type Row = framework.NotifiedRow

// Column names a column as family:qualifier.
type Column = store.Column

// maxHints bounds the rows waiting to be looked at. Past it, Hint drops
// rows and wakes the scanning goroutines instead: a pass finds them.
const maxHints = 4096

// hints holds the rows Hint was given until a scanning goroutine takes
// them.
type hints struct {
	rows []*Row
	// queued holds the rows hinted and not looked at yet: waiting in rows,
	// or taken by a scanning goroutine that has not reached them. A pass
	// that hands out such a row has found nothing a hint would not have.
	// Each is the entry in rows: a later hint of the row adds its columns
	// there.
	queued map[rowKey]*Row
	// held holds, with when, the hinted rows that were busy when looked
	// at: a notification on them was in flight here (a weak one notified
	// again while its observer ran, say), or another holder had their
	// advisory lock. What the hint named stays for later. A release by
	// this scanner's pool hints the row again; a pass that begins after
	// the entry covers the rest (a holder in another process, say), and
	// the entry is dropped then.
	held map[rowKey]heldRow
	// ready holds a token once Hint added rows, so that one idle
	// scanning goroutine wakes to take them (a busy one may have taken
	// them first, between passes).
	ready chan struct{}
}

type rowKey struct{ table, row string }

// heldRow notes a busy hinted row (see hints.held). While looks at the row
// run, the note is provisional: a release then only marks it, and the
// last look to end decides. If a look found the row busy and it was
// released meanwhile, that look hints it again; if none found it busy,
// the note goes, and the row gets no second look.
type heldRow struct {
	at       time.Time
	looks    int  // looks at the row running now
	busy     bool // one of them found it busy
	released bool // this scanner's pool released it meanwhile
	// columns are those the looks that found the row busy were given,
	// hinted again on release (nil: the whole row); meaningful once busy.
	columns []Column
}

// addColumns adds the columns cols to the set have, where nil stands for
// every column of the row (a hint that named none).
func addColumns(have, cols []Column) []Column {
	if have == nil || cols == nil {
		return nil
	}
	for _, c := range cols {
		if !slices.Contains(have, c) {
			have = append(have, c)
		}
	}
	return have
}

// Hint tells the scanner that rows just received notifications (committed
// in this process, or announced by another), so that it looks at those
// rows at once: where finding them by a pass means stepping over every
// pending notification and every one removed since the store last
// compacted them. A hint that names the notified columns has their
// observers run with no read of the row's notifications beforehand (each
// run reads its own notification first, and one that is gone costs that
// read alone); one that names none costs a seek in the row's
// notifications. Passes still run, backing off as when idle while hints
// name all they find, and find anything no hint named. Rows are copied.
// It never blocks.
func (s *Scanner) Hint(rows ...Row) {
	dropped := false
	s.mu.Lock()
	for _, r := range rows {
		var cols []Column // nil for none: the whole row
		if len(r.Columns) > 0 {
			cols = slices.Clone(r.Columns)
		}
		k := rowKey{r.Table, string(r.Row)}
		if q, ok := s.hints.queued[k]; ok {
			q.Columns = addColumns(q.Columns, cols)
			continue
		}
		if len(s.hints.rows) >= maxHints {
			dropped = true
			break
		}
		q := &Row{Table: r.Table, Row: slices.Clone(r.Row), Columns: cols}
		s.hints.queued[k] = q
		s.hints.rows = append(s.hints.rows, q)
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

// Notified is a framework.Options.Notified hook for this scanner: it
// hints the rows a commit notified, or wakes the scanning goroutines when
// the commit named none (it notified too many).
func (s *Scanner) Notified(rows []Row) {
	if len(rows) == 0 {
		s.Wake()
		return
	}
	s.Hint(rows...)
}

// takeHints returns the hinted rows, in key order. They stay queued until
// looked at (beginLook), and only beginLook reads their columns, which
// later hints may still add to.
func (s *Scanner) takeHints() []*Row {
	s.mu.Lock()
	rows := s.hints.rows
	s.hints.rows = nil
	s.mu.Unlock()
	slices.SortFunc(rows, func(a, b *Row) int {
		if c := strings.Compare(a.Table, b.Table); c != 0 {
			return c
		}
		return bytes.Compare(a.Row, b.Row)
	})
	return rows
}

// runHints dispatches the notifications of the hinted rows: those of the
// columns the hints named, or those a look at the row finds. A row that
// is busy (see hints.held) is looked at again when this scanner's pool
// releases it, and otherwise left to a pass.
func (s *Scanner) runHints(ctx context.Context) {
	rows := s.takeHints()
	for i, r := range rows {
		if ctx.Err() != nil {
			s.lookedAt(rows[i:]...)
			return
		}
		s.stats.Hinted.Add(1)
		k := rowKey{r.Table, string(r.Row)}
		cols := s.beginLook(k, r)
		var busy bool
		if cols == nil {
			_, busy = s.scanRange(ctx, r.Table, r.Row, append(slices.Clip(r.Row), 0), nil)
		} else {
			busy = s.runNamed(ctx, r.Table, r.Row, cols)
		}
		if busy {
			s.stats.Held.Add(1)
		}
		if again := s.endLook(k, busy, cols); again != nil {
			s.Hint(*again)
		}
	}
}

// runNamed dispatches the notifications of the columns cols of row as a
// hint named them, without reading the row. It reports whether the row
// was busy: one of them in flight here, or the row locked by another.
func (s *Scanner) runNamed(ctx context.Context, table string, row []byte, cols []Column) (busy bool) {
	now := time.Now()
	var ns []notify.Notification
	for _, c := range cols {
		n := notify.Notification{Table: table, Row: row, Column: c}
		switch due, inflight := s.due(n, now); {
		case due:
			ns = append(ns, n)
		case inflight:
			busy = true
		}
	}
	if len(ns) == 0 {
		return busy
	}
	s.stats.Named.Add(uint64(len(ns)))
	return !s.dispatchRow(ctx, table, row, ns, nil) || busy
}

// beginLook notes, before a look at the hinted row k (whose queue entry
// is r), that it is looked at and, provisionally, held (see heldRow): a
// hint during the look queues the row again, and a release during it is
// marked rather than finding no note and leaving the row to a pass. It
// returns the columns the hints named (nil: look at the whole row).
func (s *Scanner) beginLook(k rowKey, r *Row) []Column {
	s.mu.Lock()
	defer s.mu.Unlock()
	cols := r.Columns
	delete(s.hints.queued, k)
	h, ok := s.hints.held[k]
	switch {
	case ok && h.looks > 0: // another look runs: the last to end decides
	case !ok && len(s.hints.held) >= maxHints:
		return cols // left to a pass
	default: // new, or an earlier look's note: this look decides anew
		if ok { // and looks at what the earlier found busy too
			cols = addColumns(cols, h.columns)
		}
		h = heldRow{at: time.Now()}
	}
	h.looks++
	s.hints.held[k] = h
	return cols
}

// endLook records what a look begun by beginLook at the columns cols
// found, and returns the hint to give again, if any: the last look to
// end found, or heard of, the row busy, and it was released meanwhile.
func (s *Scanner) endLook(k rowKey, busy bool, cols []Column) (again *Row) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hints.held[k]
	if !ok {
		return nil // left to a pass, which may have covered it already
	}
	h.looks--
	if busy {
		if h.busy {
			h.columns = addColumns(h.columns, cols)
		} else {
			h.busy, h.columns = true, slices.Clone(cols)
		}
	}
	switch {
	case h.looks > 0:
		s.hints.held[k] = h
	case !h.busy:
		delete(s.hints.held, k)
	case h.released:
		delete(s.hints.held, k)
		again = &Row{Table: k.table, Row: []byte(k.row), Columns: h.columns}
	default:
		s.hints.held[k] = h // held: the release hints it
	}
	return again
}

// released is called when this scanner's pool released the advisory lock
// of row: a hint that found the row held is given again.
func (s *Scanner) released(table string, row []byte) {
	k := rowKey{table, string(row)}
	s.mu.Lock()
	h, held := s.hints.held[k]
	if held && h.looks > 0 {
		h.released = true
		s.hints.held[k] = h
		held = false // the last look to end decides
	} else {
		delete(s.hints.held, k)
	}
	s.mu.Unlock()
	if held {
		s.Hint(Row{Table: table, Row: row, Columns: h.columns})
	}
}

// passed forgets the held rows of table noted before a complete pass over
// it that began at began, and not being looked at: the pass handed out
// their notifications, or found none.
func (s *Scanner) passed(table string, began time.Time) {
	s.mu.Lock()
	for k, h := range s.hints.held {
		if k.table == table && h.looks == 0 && h.at.Before(began) {
			delete(s.hints.held, k)
		}
	}
	s.mu.Unlock()
}

// lookedAt forgets that rows were hinted.
func (s *Scanner) lookedAt(rows ...*Row) {
	s.mu.Lock()
	for _, r := range rows {
		delete(s.hints.queued, rowKey{r.Table, string(r.Row)})
	}
	s.mu.Unlock()
}

// hinted reports whether a hint named row and no scanning goroutine has
// looked at it since.
func (s *Scanner) hinted(table string, row []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.hints.queued[rowKey{table, string(row)}]
	return ok
}

// idle waits for d, ctx or wake, whichever comes first, looking at hinted
// rows as they come. It reports whether it was woken: work nobody named
// was announced. Hints are not such news; they are looked at here.
func (s *Scanner) idle(ctx context.Context, d time.Duration, wake <-chan struct{}) (woken bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return false
		case <-wake:
			return true
		case <-s.hints.ready:
			s.runHints(ctx)
		}
	}
}
