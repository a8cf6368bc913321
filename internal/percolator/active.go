package percolator

import (
	"sync"
	"sync/atomic"
)

// activeShards is the number of independently locked parts of an
// activeSet: every transaction enters and leaves the set, so with one lock
// concurrent readers queue on it (a convoy that held a 2-core machine to
// one core's worth of read-only transactions).
const activeShards = 16

// activeSet holds the start timestamps of a DB's running transactions and
// the DB's safe point, so that a transaction never starts below the safe
// point and the safe point never passes a running transaction.
type activeSet struct {
	shards    [activeShards]activeShard
	safePoint atomic.Uint64 // transactions below it fail with ErrSnapshotTooOld
}

type activeShard struct {
	mu sync.Mutex
	m  map[uint64]int // start ts -> running transactions
	_  [40]byte       // keeps shards on separate cache lines
}

func (a *activeSet) shard(ts uint64) *activeShard { return &a.shards[ts%activeShards] }

// enter registers a transaction at startTs unless startTs is below the
// safe point; it returns the safe point and whether it entered.
func (a *activeSet) enter(startTs uint64) (uint64, bool) {
	s := a.shard(startTs)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Read under the shard's lock: raise holds every shard's lock while
	// it moves the safe point, so either it sees this transaction or
	// this transaction sees the new safe point.
	if sp := a.safePoint.Load(); startTs < sp {
		return sp, false
	}
	if s.m == nil {
		s.m = make(map[uint64]int)
	}
	s.m[startTs]++
	return 0, true
}

// leave unregisters one transaction at startTs.
func (a *activeSet) leave(startTs uint64) {
	s := a.shard(startTs)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[startTs]--; s.m[startTs] <= 0 {
		delete(s.m, startTs)
	}
}

// oldest returns the smallest running start timestamp, or limit if none is
// smaller.
func (a *activeSet) oldest(limit uint64) uint64 {
	for i := range a.shards {
		s := &a.shards[i]
		s.mu.Lock()
		limit = s.oldest(limit)
		s.mu.Unlock()
	}
	return limit
}

func (s *activeShard) oldest(limit uint64) uint64 {
	for ts := range s.m {
		if ts < limit {
			limit = ts
		}
	}
	return limit
}

// adopt moves the safe point up to sp, running transactions or not: a
// safe point someone else persisted (and collected below) binds
// transactions that started before it too, whose next read fails.
func (a *activeSet) adopt(sp uint64) {
	for {
		cur := a.safePoint.Load()
		if sp <= cur || a.safePoint.CompareAndSwap(cur, sp) {
			return
		}
	}
}

// raise moves the safe point up to upTo, but not past a running
// transaction nor back, and returns it.
func (a *activeSet) raise(upTo uint64) uint64 {
	for i := range a.shards {
		a.shards[i].mu.Lock()
	}
	defer func() {
		for i := range a.shards {
			a.shards[i].mu.Unlock()
		}
	}()
	sp := upTo
	for i := range a.shards {
		sp = a.shards[i].oldest(sp)
	}
	sp = max(sp, a.safePoint.Load())
	a.adopt(sp) // a higher safe point adopted meanwhile stays
	return sp
}
