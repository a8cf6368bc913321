package tikvengine

import (
	"bytes"
	"slices"
	"sync"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/keys"
)

// recentLimit bounds the cells recent keeps: past it, what it kept is
// dropped, and Pending reads those cells from TiKV.
const recentLimit = 1 << 16

// recent keeps the notification keys this DB's own commits wrote, by cell,
// until Pending takes them: the runner that wrote a page is usually the
// one whose scanner, woken by the commit, runs the observer at once, and
// Pending then knows what is pending without reading the notification
// range (a TiKV request per run). What it hands out was committed before
// Pending returned, which is all Pending promises (the run's snapshot is
// drawn afterwards); keys of the cell that other writers left, or that
// did not fit, stay in TiKV for a later pass to find, and their run finds
// the change claimed already if this one saw it.
type recent struct {
	mu    sync.Mutex
	cells map[string]*recentCell
}

// recentCell is what recent keeps of a cell: its notification keys with
// the trace contexts they carry, and the highest commit timestamp among
// them.
type recentCell struct {
	entries  []recentKey
	commitTs uint64
}

type recentKey struct {
	key, trace []byte
}

// add keeps the notification keys of a commit at commitTs, whose writer's
// trace context was trace.
func (r *recent) add(ks []string, trace []byte, commitTs uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cells == nil {
		r.cells = map[string]*recentCell{}
	}
	for _, k := range ks {
		cell := k[:len(k)-keys.TsLen]
		c := r.cells[cell]
		if c == nil {
			if len(r.cells) >= recentLimit {
				// Full of cells nobody here took (other runners ran
				// them): start over rather than stop keeping any.
				clear(r.cells)
			}
			c = &recentCell{}
			r.cells[cell] = c
		}
		c.entries = append(c.entries, recentKey{[]byte(k), trace})
		c.commitTs = max(c.commitTs, commitTs)
	}
}

// take removes and returns what recent keeps of the cell whose
// notification keys start with prefix, as a Pending for n; nil if it
// keeps nothing of it.
func (r *recent) take(prefix []byte, n engine.Notification) *engine.Pending {
	r.mu.Lock()
	c := r.cells[string(prefix)]
	delete(r.cells, string(prefix))
	r.mu.Unlock()
	if c == nil {
		return nil
	}
	// In key order, which is newest writer first, as Pending reads them.
	slices.SortFunc(c.entries, func(a, b recentKey) int { return bytes.Compare(a.key, b.key) })
	st := &pending{keys: make([][]byte, len(c.entries)), readTs: c.commitTs}
	p := &engine.Pending{Notification: n, Versions: make([]uint64, len(c.entries)), State: st}
	for i, e := range c.entries {
		st.keys[i] = e.key
		p.Versions[i] = keys.DecodeTs(e.key)
		if len(e.trace) > 0 {
			if p.Traces == nil {
				p.Traces = make([][]byte, len(c.entries))
			}
			p.Traces[i] = e.trace
		}
	}
	return p
}
