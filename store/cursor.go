package store

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/trickle-dev/trickle/internal/keys"
)

// cursor wraps a pebble iterator with the bookkeeping that lets span reads
// skip redundant seeks, and with the test hooks that record visited keys and
// seeks.
//
// A cursor is in one of two modes. After seekGE it walks the iterator's
// bounds. After seekPrefixGE it is confined to one column (one key prefix,
// see keys.Split): pebble consults only the sstables whose bloom filter may
// hold the column, and next never leaves the column; running off the
// column's last version leaves the cursor invalid, and reaching any other
// column takes another seek.
//
// Invariant while hasLo: every key in [lo, current position) was consumed
// (returned to the caller) since lo was set, where an invalid position means
// the end of the bounds or, in prefix mode, of the column. A seek target t
// with lo <= t <= position therefore needs no seek when the caller knows
// that no consumed key should be returned again (see seekSpan).
type cursor struct {
	it     *pebble.Iterator
	visit  func([]byte) // test hook, see testHooks
	onSeek func([]byte) // test hook, see testHooks
	lo     []byte
	hasLo  bool
	// prefixLen is the length of the column prefix of lo in prefix mode,
	// and 0 otherwise.
	prefixLen int
}

// note reports the current key to the visit hook.
func (c *cursor) note() {
	if c.visit != nil && c.it.Valid() {
		c.visit(c.it.Key())
	}
}

// seekGE positions at the first key >= k within the bounds, leaves prefix
// mode and restarts the consumed range at k.
func (c *cursor) seekGE(k []byte) bool {
	if c.onSeek != nil {
		c.onSeek(k)
	}
	ok := c.it.SeekGE(k)
	c.lo = append(c.lo[:0], k...)
	c.hasLo = true
	c.prefixLen = 0
	c.note()
	return ok
}

// seekPrefixGE positions at the first version >= k of the column k belongs
// to (k is a column prefix followed by a timestamp), enters prefix mode for
// that column and restarts the consumed range at k.
func (c *cursor) seekPrefixGE(k []byte) bool {
	if c.onSeek != nil {
		c.onSeek(k)
	}
	ok := c.it.SeekPrefixGE(k)
	c.lo = append(c.lo[:0], k...)
	c.hasLo = true
	c.prefixLen = len(k) - keys.TsLen
	c.note()
	return ok
}

// inPrefixMode reports whether the cursor is confined to one column.
func (c *cursor) inPrefixMode() bool { return c.prefixLen > 0 }

// next moves to the next key; the key left behind counts as consumed.
func (c *cursor) next() bool {
	ok := c.it.Next()
	c.note()
	return ok
}

// markColumnStart restarts the consumed range at colPrefix, the prefix of
// the column whose first version the cursor is at: no version of the
// column precedes the position, so every key in [colPrefix, position) was
// consumed vacuously, and a span seek to any version at or before the
// position needs no seek.
func (c *cursor) markColumnStart(colPrefix []byte) {
	c.lo = append(c.lo[:0], colPrefix...)
	c.hasLo = true
}

// positionedAt reports whether the cursor, having consumed everything from
// lo up to its position, can serve a seek to t (a column prefix followed by
// a timestamp) without seeking: lo <= t, the position (or the exhaustion of
// the bounds or of the column) is at or past t, and in prefix mode t is in
// the cursor's column, so exhaustion means no version of t's column >= t
// remains.
func (c *cursor) positionedAt(t []byte) bool {
	if !c.hasLo || c.it.Error() != nil || bytes.Compare(c.lo, t) > 0 {
		return false
	}
	if c.prefixLen > 0 && (len(t) != c.prefixLen+keys.TsLen || !bytes.Equal(c.lo[:c.prefixLen], t[:c.prefixLen])) {
		return false
	}
	return !c.it.Valid() || bytes.Compare(c.it.Key(), t) >= 0
}

// seekSpan positions at the first version >= t of t's column (t is a column
// prefix followed by a timestamp), skipping the seek when positionedAt(t):
// every key in [t, position) was consumed, and the caller guarantees that
// consumed keys are not wanted again. Otherwise it seeks in prefix mode, so
// afterwards the cursor may be confined to t's column. It returns whether
// the seek was skipped.
func (c *cursor) seekSpan(t []byte) (skipped bool) {
	if c.positionedAt(t) {
		return true
	}
	c.seekPrefixGE(t)
	return false
}

func (c *cursor) valid() bool { return c.it.Valid() }

// key returns the current key; it is only valid until the cursor moves.
func (c *cursor) key() []byte { return c.it.Key() }

// value returns the current value; it is only valid until the cursor moves.
func (c *cursor) value() ([]byte, error) {
	v, err := c.it.ValueAndErr()
	if err != nil {
		return nil, fmt.Errorf("store: reading value: %w", err)
	}
	return v, nil
}

// err returns the iterator's accumulated error.
func (c *cursor) err() error {
	if err := c.it.Error(); err != nil {
		return fmt.Errorf("store: iterating: %w", err)
	}
	return nil
}

// rebound confines the cursor to [lower, upper) instead of its current
// bounds, keeping its iterator (and so the iterator's snapshot): reading
// several rows this way costs one iterator, not one per row. Pebble copies
// the bounds. The position is lost, so the next move must be a seek, and
// the consumed range starts empty.
func (c *cursor) rebound(lower, upper []byte) {
	c.it.SetBounds(lower, upper)
	c.hasLo = false
	c.prefixLen = 0
}

func (c *cursor) close() { c.it.Close() }
