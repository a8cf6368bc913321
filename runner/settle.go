package runner

import "time"

// settle decides, from the count of timestamps the oracle issued sampled
// over time, when a store has settled after much work: at least after
// timestamps were issued since the last collection, and fewer than a
// hundredth of that many during the last window (GCLag). Collecting then
// removes what the work left behind (the versions it overwrote, the
// notifications and deltas it consumed) at once, instead of up to
// GCInterval later: the versions the work wrote are all older than the
// window, so a safe point of now less GCLag passes them. Steady work
// never settles; the periodic collection handles it.
//
// It decides and does nothing else: the runner samples the oracle and
// collects (see Runner.collect), and tests drive it with their own clock.
type settle struct {
	after  uint64        // timestamps since the last collection; 0 never settles
	window time.Duration // how long the store must have been quiet

	base    uint64   // issued when the last collection ran
	samples []sample // issued over the last window, oldest first
}

type sample struct {
	at     time.Time
	issued uint64
}

// observe records that the oracle had issued issued timestamps at now and
// reports whether the store has settled.
func (s *settle) observe(now time.Time, issued uint64) bool {
	if n := len(s.samples); n > 0 && issued < s.samples[n-1].issued {
		// The count restarted (a new oracle took over): start over.
		s.samples, s.base = s.samples[:0], 0
	}
	s.samples = append(s.samples, sample{at: now, issued: issued})
	// Keep the newest sample at or before the window's start: the growth
	// over the window is measured from it.
	start := now.Add(-s.window)
	drop := 0
	for drop+1 < len(s.samples) && !s.samples[drop+1].at.After(start) {
		drop++
	}
	s.samples = append(s.samples[:0], s.samples[drop:]...)
	if s.after == 0 || issued < s.base+s.after {
		return false
	}
	first := s.samples[0]
	if first.at.After(start) {
		return false // not watched for a whole window yet
	}
	return (issued-first.issued)*100 < s.after
}

// collected records that a collection ran when the oracle had issued
// issued timestamps.
func (s *settle) collected(issued uint64) { s.base = issued }

// settleTick is how often the runner samples the oracle for settle and
// checks whether a collection is due: a sixth of the window, within
// [100ms, 10s], and no longer than the collection interval.
func settleTick(window, interval time.Duration) time.Duration {
	return min(max(window/6, 100*time.Millisecond), 10*time.Second, interval)
}
