package store

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
)

// latchStripes is the number of row latches. Rows hash onto stripes, so two
// rows share a latch with probability 1/latchStripes; sharing only costs
// parallelism, never correctness.
const latchStripes = 4096

// latches serializes row transactions on the same row while letting
// transactions on different rows run in parallel. A latch is held from
// reading the row for the checks until the mutations are committed (and,
// for a synced write, until the write is on stable storage), which is what
// makes a RowTxn an atomic read-modify-write.
//
// Each stripe also tells readers whether a synced write of one of its rows
// is in flight: pebble makes a batch readable before its log write is on
// stable storage, and a reader that acted on such a write (a commit point,
// a rollback record) could see it taken back by a crash after others acted
// on its absence. Readers of a row wait for the synced write in flight on
// its stripe, if any, once they have read (see awaitDurable).
type latches struct {
	seed    maphash.Seed
	stripes [latchStripes]stripe
	// onWait, set only by tests before the latches are used concurrently,
	// is called with a stripe's index right before a caller blocks on it
	// because another holds it, so that tests can tell a waiting caller
	// from one that has not arrived yet without sleeping.
	onWait func(stripe int)
	// onDurableWait, set only by tests, is called with a stripe's index
	// right before a reader waits for a synced write in flight on it.
	onDurableWait func(stripe int)
}

// stripe is one latch. It keeps to its own cache line so that unrelated
// rows do not contend through false sharing.
type stripe struct {
	sync.Mutex
	// syncing is closed when the synced write in flight on the stripe is
	// on stable storage; nil while none is. Only the latch's holder sets
	// and clears it.
	syncing atomic.Pointer[chan struct{}]
	_       [48]byte
}

func newLatches() *latches {
	return &latches{seed: maphash.MakeSeed()}
}

// index returns the stripe of (table, row).
func (l *latches) index(table string, row []byte) int {
	var h maphash.Hash
	h.SetSeed(l.seed)
	h.WriteString(table)
	h.WriteByte(0)
	h.Write(row)
	return int(h.Sum64() % latchStripes)
}

// lock acquires the latch of (table, row) and returns it for unlocking.
func (l *latches) lock(table string, row []byte) *stripe {
	return l.acquire(l.index(table, row))
}

// acquire locks stripe x and returns it.
func (l *latches) acquire(x int) *stripe {
	s := &l.stripes[x]
	if l.onWait != nil {
		if s.TryLock() {
			return s
		}
		l.onWait(x)
	}
	s.Lock()
	return s
}

// lockAll acquires the latches of every (table, row) in rows, each stripe
// once, in stripe order so that two callers locking overlapping sets
// cannot deadlock, and returns them for unlocking.
func (l *latches) lockAll(rows func(yield func(table string, row []byte) bool)) []*stripe {
	var idx []int
	for table, row := range rows {
		idx = append(idx, l.index(table, row))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	held := make([]*stripe, len(idx))
	for i, x := range idx {
		held[i] = l.acquire(x)
	}
	return held
}

// syncing marks a synced write in flight on the stripes held, whose
// latches the caller holds, from before the write is readable until it is
// on stable storage; the returned function ends it.
func syncing(held ...*stripe) (done func()) {
	ch := make(chan struct{})
	for _, s := range held {
		s.syncing.Store(&ch)
	}
	return func() {
		for _, s := range held {
			s.syncing.Store(nil)
		}
		close(ch)
	}
}

// awaitDurable returns once the synced write in flight on the stripe of
// (table, row) when it is called, if any, is on stable storage, or ctx
// ends. A reader calls it after it has read the row: every synced write
// it may have read was marked from before it was readable, so one still
// in flight is found, and one not found is durable. Waiting only for the
// write found keeps a reader of a busy row from waiting for ever.
func (l *latches) awaitDurable(ctx context.Context, table string, row []byte) error {
	x := l.index(table, row)
	ch := l.stripes[x].syncing.Load()
	if ch == nil {
		return nil
	}
	if l.onDurableWait != nil {
		l.onDurableWait(x)
	}
	select {
	case <-*ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store: waiting for the synced write in flight on %s/%q to reach stable storage: %w", table, row, ctx.Err())
	}
}
