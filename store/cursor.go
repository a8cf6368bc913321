package store

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// cursor wraps a pebble iterator with the bookkeeping that lets span reads
// skip redundant seeks, and with the test hook that records visited keys.
//
// Invariant while hasLo: every key in [lo, current position) was consumed
// (returned to the caller) since lo was set. A seek target t with
// lo <= t <= position therefore needs no seek when the caller knows that no
// consumed key should be returned again (see seekSpan).
type cursor struct {
	it     *pebble.Iterator
	visit  func([]byte) // test hook, see testHooks
	onSeek func([]byte) // test hook, see testHooks
	lo     []byte
	hasLo  bool
}

// note reports the current key to the visit hook.
func (c *cursor) note() {
	if c.visit != nil && c.it.Valid() {
		c.visit(c.it.Key())
	}
}

// seekGE positions at the first key >= k and restarts the consumed range at k.
func (c *cursor) seekGE(k []byte) bool {
	if c.onSeek != nil {
		c.onSeek(k)
	}
	ok := c.it.SeekGE(k)
	c.lo = append(c.lo[:0], k...)
	c.hasLo = true
	c.note()
	return ok
}

// next moves to the next key; the key left behind counts as consumed.
func (c *cursor) next() bool {
	ok := c.it.Next()
	c.note()
	return ok
}

// markLo restarts the consumed range at the current position (nothing
// consumed yet).
func (c *cursor) markLo() {
	c.lo = append(c.lo[:0], c.it.Key()...)
	c.hasLo = true
}

// seekSpan positions at the first key >= t, skipping the seek when the
// iterator is already there: when lo <= t and the current position (or
// exhaustion) is at or past t, every key in [t, position) was consumed, and
// the caller guarantees consumed keys are not wanted again. It returns
// whether the seek was skipped.
func (c *cursor) seekSpan(t []byte) (skipped bool) {
	if c.hasLo && bytes.Compare(c.lo, t) <= 0 && c.it.Error() == nil &&
		(!c.it.Valid() || bytes.Compare(c.it.Key(), t) >= 0) {
		return true
	}
	c.seekGE(t)
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

func (c *cursor) close() { c.it.Close() }

// setBounds changes the iterator's bounds; the cursor must be re-seeked.
func (c *cursor) setBounds(lower, upper []byte) {
	c.it.SetBounds(lower, upper)
	c.hasLo = false
}
