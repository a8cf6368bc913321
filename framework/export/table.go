package export

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// Table is the contract of a sink kept in memory: per key, the entry with
// the highest sequence number, tombstones included (so that a re-delivered
// older value does not bring a deleted key back). It is what a consumer
// rebuilding a queue's table from a stream keeps, and a Sink for tests.
// It is safe for concurrent use.
type Table struct {
	mu   sync.Mutex
	rows map[string]Entry
	// applied and stale count Apply's outcomes.
	applied, stale int
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{rows: map[string]Entry{}} }

// Apply keeps e if its sequence number is above the one the table holds
// for its key, and reports whether it did. An entry whose sequence
// number the table holds already (a re-delivery) changes nothing.
func (t *Table) Apply(e Entry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if cur, ok := t.rows[string(e.Key)]; ok && cur.Seq >= e.Seq {
		t.stale++
		return false
	}
	t.rows[string(e.Key)] = e
	t.applied++
	return true
}

// Export applies entries: Table is a Sink.
func (t *Table) Export(_ context.Context, _ string, entries []Entry) error {
	for _, e := range entries {
		t.Apply(e)
	}
	return nil
}

// Get returns the value of key and whether the table holds one (a
// tombstone is no value).
func (t *Table) Get(key string) ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.rows[key]
	if !ok || e.Delete {
		return nil, false
	}
	return e.Value, true
}

// Values returns a copy of the table's values by key, without the
// tombstones.
func (t *Table) Values() map[string][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string][]byte, len(t.rows))
	for k, e := range t.rows {
		if !e.Delete {
			out[k] = e.Value
		}
	}
	return out
}

// Keys returns the keys with a value, sorted.
func (t *Table) Keys() []string { return slices.Sorted(maps.Keys(t.Values())) }

// Counts returns how many entries Apply kept and how many it found stale
// or repeated.
func (t *Table) Counts() (applied, stale int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.applied, t.stale
}

// Entries returns the table's entries, tombstones included, sorted by
// key: what a sink given them in one batch would hold.
func (t *Table) Entries() []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Entry, 0, len(t.rows))
	for _, k := range slices.Sorted(maps.Keys(t.rows)) {
		out = append(out, t.rows[k])
	}
	return out
}
