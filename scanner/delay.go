package scanner

import (
	"time"

	"github.com/trickle-dev/trickle/framework/notify"
)

// A notification whose observer has a delay (Options.Delay) is held back
// for that long after this scanner first found it, so that the changes
// that arrive meanwhile are dealt with by one run. A weak observer that
// recomputes something from many changes (a cluster from its members'
// inlinks) runs once for a burst of them instead of once per change that
// happened to land between two of its runs. Notifications that collapse
// into one run this way need no run of their own; what the delay costs is
// latency, which is why it is the observer's choice.

// maxDelayed bounds the notifications held back at once. Past it, new ones
// are not held: a scanner never keeps more state than this for delays.
const maxDelayed = 1 << 16

// delayedAge is how long a held-back notification's note is kept without
// its run coming (its row locked by another process, say, which ran it):
// older notes are dropped when the notes are full.
const delayedAge = 10 * time.Minute

// clock is the scanner's time for delays; tests step it.
type clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func())
}

type realClock struct{}

func (realClock) Now() time.Time                      { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) { time.AfterFunc(d, f) }

// heldBack reports whether n is to wait out its observer's delay, noting
// when it was first found and arranging a look at it when the delay ends.
// Called with s.mu held.
func (s *Scanner) heldBack(k string, n notify.Notification, now time.Time) bool {
	if s.opts.Delay == nil {
		return false
	}
	d := s.opts.Delay(n)
	if d <= 0 {
		return false
	}
	first, ok := s.delayed[k]
	if ok {
		return now.Sub(first) < d
	}
	if len(s.delayed) >= maxDelayed {
		for dk, at := range s.delayed {
			if now.Sub(at) > delayedAge {
				delete(s.delayed, dk)
			}
		}
		if len(s.delayed) >= maxDelayed {
			return false
		}
	}
	s.delayed[k] = now
	row := Row{Table: n.Table, Row: n.Row, Columns: []Column{n.Column}}
	s.clock.AfterFunc(d, func() { s.Hint(row) })
	return true
}

// ranDelayed forgets that n was held back: its run came. Called with s.mu
// held.
func (s *Scanner) ranDelayed(k string) { delete(s.delayed, k) }
