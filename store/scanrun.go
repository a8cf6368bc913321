package store

import (
	"bytes"
	"context"
	"fmt"

	"github.com/trickle-dev/trickle/internal/keys"
)

// nextsBeforeSeek is how many versions a scan steps over with Next before
// it seeks to the next column instead: a Next is much cheaper than a seek
// when a column has only a few more versions.
const nextsBeforeSeek = 2

// scanState is the per-iteration state of one scan.
type scanState struct {
	p     *scanPlan
	ctx   context.Context
	c     *cursor
	steps int
	// latches tell whether a row's synced write is still in flight;
	// durable says that the current row's was awaited (see yieldCell).
	latches *latches
	durable bool

	rowRaw    []byte // encoded prefix of the current row
	row       []byte // decoded current row
	colRaw    []byte // escaped family+qualifier of the current column
	col       Column
	colPrefix []byte // encoded prefix of the current column
	target    []byte
	// stepPending is set when the cursor still sits on a version the
	// current column already yielded (the last one a span's Limit allowed).
	stepPending bool
}

// run drives the iterator from p.start and yields cells until the range is
// exhausted or the consumer stops. It returns the error to yield, if any.
func (p *scanPlan) run(ctx context.Context, c *cursor, l *latches, yield func(Cell, error) bool) error {
	s := &scanState{p: p, ctx: ctx, c: c, latches: l}
	ok := c.seekGE(p.start)
	for ok {
		if err := s.tick(); err != nil {
			return err
		}
		k := c.key()
		l, err := keys.Parse(k)
		if err != nil {
			return fmt.Errorf("store: Scan: corrupt key %x: %w", k, err)
		}
		if !bytes.Equal(s.rowRaw, k[:l.RowEnd]) {
			s.rowRaw = append(s.rowRaw[:0], k[:l.RowEnd]...)
			s.row = keys.AppendUnescaped(s.row[:0], k[l.TableEnd:l.RowEnd])
			s.durable = false
		}
		colRaw := k[l.RowEnd:l.QualifierEnd]
		if p.filter != nil {
			if want, next := p.filter.match(colRaw, l.FamilyEnd-l.RowEnd); !want {
				ok = s.skipTo(next)
				continue
			}
		}
		if !bytes.Equal(s.colRaw, colRaw) { // columns repeat across rows: reuse strings
			s.colRaw = append(s.colRaw[:0], colRaw...)
			s.col = Column{
				Family:    keys.UnescapeString(k[l.RowEnd:l.FamilyEnd]),
				Qualifier: keys.UnescapeString(k[l.FamilyEnd:l.QualifierEnd]),
			}
		}
		s.colPrefix = append(s.colPrefix[:0], k[:l.QualifierEnd]...)
		more, err := s.column(yield)
		if err != nil || !more {
			return err
		}
		ok = s.leaveColumn()
	}
	return c.err()
}

// tick counts an iterator step and checks the context now and then.
func (s *scanState) tick() error {
	s.steps++
	if s.steps%ctxCheckEvery == 0 {
		return s.ctx.Err()
	}
	return nil
}

// inColumn reports whether key is a version of the current column.
func (s *scanState) inColumn(key []byte) bool {
	return len(key) == len(s.colPrefix)+keys.TsLen && bytes.HasPrefix(key, s.colPrefix)
}

// column yields the current column's versions selected by the spans. The
// cursor is at the column's first version: run only calls it after a
// seek to a row or column boundary or a step from the previous column,
// never from inside a column. A span whose newest version is not where
// the cursor already is takes a prefix seek within the column; so a
// column whose first version is at or below the first span's newest
// timestamp (the lock span of a transactional read, when the column is
// not locked) needs no seek, and the scan steps on to the next column
// with Next.
func (s *scanState) column(yield func(Cell, error) bool) (bool, error) {
	c := s.c
	c.markColumnStart(s.colPrefix)
	s.stepPending = false
	for _, sp := range s.p.spans {
		if !s.p.allVersions {
			s.stepPast()
			s.target = keys.AppendTs(append(s.target[:0], s.colPrefix...), sp.MaxTs)
			c.seekSpan(s.target)
		}
		for n := 0; c.valid(); {
			k := c.key()
			if !s.inColumn(k) {
				break
			}
			ts := keys.DecodeTs(k)
			if ts < sp.MinTs {
				break
			}
			v, err := c.value()
			if err != nil {
				return false, err
			}
			if !s.durable {
				// The scan's snapshot may hold a synced write of this
				// row that is not on stable storage yet.
				if err := s.latches.awaitDurable(s.ctx, s.p.table, s.row); err != nil {
					return false, err
				}
				s.durable = true
			}
			if !yield(makeCell(s.row, s.col, ts, v), nil) {
				return false, nil
			}
			if err := s.tick(); err != nil {
				return false, err
			}
			if n++; n == sp.Limit {
				// Step past this version only if the cursor has to move
				// on within the column (see leaveColumn).
				s.stepPending = true
				break
			}
			c.next()
		}
	}
	return true, nil
}

// stepPast takes the step past the last version a span took, if column left
// it pending.
func (s *scanState) stepPast() {
	if s.stepPending {
		s.stepPending = false
		s.c.next()
	}
}

// leaveColumn moves the cursor past the current column's remaining versions:
// a few Nexts, then a seek to the column prefix's successor. A cursor that
// a span confined to the column (prefix mode) cannot step out of it, so it
// seeks right away.
func (s *scanState) leaveColumn() bool {
	c := s.c
	if !c.inPrefixMode() {
		s.stepPast()
		for range nextsBeforeSeek {
			if !c.valid() || !s.inColumn(c.key()) {
				return c.valid()
			}
			c.next()
		}
		if !c.valid() || !s.inColumn(c.key()) {
			return c.valid()
		}
	}
	// The column prefix ends with the terminator 0x00 0x01; its successor
	// ends with 0x00 0x02.
	s.target = append(s.target[:0], s.colPrefix...)
	s.target[len(s.target)-1]++
	return s.seekGE(s.target)
}

// seekGE seeks to target, unless target is at or past the end of the
// scan's range: pebble would still seek every level there, only to find
// nothing.
func (s *scanState) seekGE(target []byte) bool {
	if s.p.upper != nil && bytes.Compare(target, s.p.upper) >= 0 {
		return false
	}
	return s.c.seekGE(target)
}

// skipTo seeks to the column with escaped suffix next in the current row, or
// to the next row if next is nil.
func (s *scanState) skipTo(next []byte) bool {
	s.target = append(s.target[:0], s.rowRaw...)
	if next == nil {
		s.target[len(s.target)-1]++ // row prefix ends with 0x00 0x01
	} else {
		s.target = append(s.target, next...)
	}
	return s.seekGE(s.target)
}
