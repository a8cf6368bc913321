package store

import (
	"hash/maphash"
	"slices"
	"sync"
)

// latchStripes is the number of row latches. Rows hash onto stripes, so two
// rows share a latch with probability 1/latchStripes; sharing only costs
// parallelism, never correctness.
const latchStripes = 4096

// latches serializes row transactions on the same row while letting
// transactions on different rows run in parallel. A latch is held from
// reading the row for the checks until the mutations are committed, which is
// what makes a RowTxn an atomic read-modify-write.
type latches struct {
	seed    maphash.Seed
	stripes [latchStripes]paddedMutex
	// onWait, set only by tests before the latches are used concurrently,
	// is called with a stripe's index right before a caller blocks on it
	// because another holds it, so that tests can tell a waiting caller
	// from one that has not arrived yet without sleeping.
	onWait func(stripe int)
}

// paddedMutex keeps each stripe on its own cache line so that unrelated rows
// do not contend through false sharing.
type paddedMutex struct {
	sync.Mutex
	_ [56]byte
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
func (l *latches) lock(table string, row []byte) *sync.Mutex {
	return l.acquire(l.index(table, row))
}

// acquire locks stripe x and returns it.
func (l *latches) acquire(x int) *sync.Mutex {
	m := &l.stripes[x].Mutex
	if l.onWait != nil {
		if m.TryLock() {
			return m
		}
		l.onWait(x)
	}
	m.Lock()
	return m
}

// lockAll acquires the latches of every (table, row) in rows, each stripe
// once, in stripe order so that two callers locking overlapping sets
// cannot deadlock, and returns them for unlocking.
func (l *latches) lockAll(rows func(yield func(table string, row []byte) bool)) []*sync.Mutex {
	var idx []int
	for table, row := range rows {
		idx = append(idx, l.index(table, row))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	held := make([]*sync.Mutex, len(idx))
	for i, x := range idx {
		held[i] = l.acquire(x)
	}
	return held
}
