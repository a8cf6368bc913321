package percolator

import "sync"

// committedCacheSize bounds how many commit outcomes a DB remembers (in
// two generations of half this size: about 3 MB at most).
const committedCacheSize = 1 << 16

// committedCache remembers the commit timestamps of transactions known to
// have committed: those this DB committed and those whose primary a status
// read found committed. That a transaction committed, and at what
// timestamp, never changes, so a remembered answer needs no store read;
// every other status (locked, rolled back, missing) can still change or be
// collected and is always read.
//
// Settling a notification asks for its writer's status, usually a
// transaction of the same process moments before: without the cache that
// was a read of a primary per settled notification version (4 % of the web
// index's CPU, and a round trip where the store is remote).
//
// A start timestamp identifies a transaction (the oracle never gives one
// twice), so it is the key.
type committedCache struct {
	mu       sync.Mutex
	cur, old map[uint64]uint64 // start -> commit timestamp
}

// get returns the commit timestamp of the transaction that started at
// startTs, if remembered.
func (c *committedCache) get(startTs uint64) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts, ok := c.cur[startTs]; ok {
		return ts, true
	}
	ts, ok := c.old[startTs]
	return ts, ok
}

// add remembers that the transaction that started at startTs committed at
// commitTs. When the current generation is full it becomes the old one and
// the previous old one is forgotten.
func (c *committedCache) add(startTs, commitTs uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		c.cur = make(map[uint64]uint64)
	}
	if len(c.cur) >= committedCacheSize/2 {
		c.old, c.cur = c.cur, make(map[uint64]uint64, committedCacheSize/2)
	}
	c.cur[startTs] = commitTs
}
