package postings

import (
	"container/heap"
)

// candidate is a cluster met in some of the query terms' rows and not
// scored yet: what its entries read so far bound, and the bound of its
// score that they and the terms' unread rows give.
type candidate struct {
	key   string
	known []bool
	tf    []float64 // bounds of the known terms' blended frequencies
	flags []Flags
	// body and anchor are the known terms' postings.
	body, anchor []int64
	prior        uint8
	bound        float64 // at least its score; recomputed as rows are read
	epoch        int     // of the rows' reads bound was computed at
	index        int     // in the heap; -1 once popped
}

// candidates are the clusters met and not scored, best bound first. Their
// bounds only fall as rows are read, so a bound computed earlier is still
// a bound: the heap refreshes its top before trusting it (a lazy
// priority queue).
type candidates struct {
	cs     *cases
	b      *Bounds
	h      candHeap
	byKey  map[string]*candidate
	scored map[string]bool
	tf     []float64
	// epoch counts the rows' reads: a bound of an earlier epoch may
	// have fallen since.
	epoch int
}

func newCandidates(cs *cases, b *Bounds) *candidates {
	return &candidates{cs: cs, b: b, byKey: map[string]*candidate{}, scored: map[string]bool{}, tf: make([]float64, len(cs.tops))}
}

func (cs *candidates) len() int { return len(cs.h) }

// saw records the entry e in a row of term i, whose bound was bound.
func (cs *candidates) saw(e Entry, i int, run Run, bound float64) {
	key := e.Cluster
	if cs.scored[key] {
		return
	}
	c := cs.byKey[key]
	if c == nil {
		n := len(cs.cs.tops)
		c = &candidate{key: key, known: make([]bool, n), tf: make([]float64, n), flags: make([]Flags, n),
			body: make([]int64, n), anchor: make([]int64, n), prior: min(run.PriorClass, PriorClasses)}
		cs.byKey[key] = c
		heap.Push(&cs.h, c)
	}
	c.known[i], c.tf[i], c.flags[i], c.body[i], c.anchor[i] = true, bound, run.Flags, e.Body, e.Anchor
	if cs.cs.p.Query.Word[i] && run.Flags&(InBody|InAnchor) == 0 {
		// Its one entry of a word holds it in the title or URL alone: no
		// match.
		cs.drop(c)
		return
	}
	cs.refresh(c)
}

// top returns the candidate with the best bound, its bound fresh, after
// dropping those that can no longer match; nil if none is left.
func (cs *candidates) top() *candidate {
	for len(cs.h) > 0 {
		c := cs.h[0]
		if c.epoch == cs.epoch {
			return c
		}
		cs.refresh(c)
	}
	return nil
}

// pop removes the top candidate: the collector scores it.
func (cs *candidates) pop() {
	c := heap.Pop(&cs.h).(*candidate)
	delete(cs.byKey, c.key)
	cs.scored[c.key] = true
}

// clear forgets every candidate.
func (cs *candidates) clear() {
	for _, c := range cs.h {
		cs.scored[c.key] = true
	}
	cs.h, cs.byKey = nil, map[string]*candidate{}
}

// read is called after a row was read: every bound may have fallen.
func (cs *candidates) read() { cs.epoch++ }

func (cs *candidates) drop(c *candidate) {
	if c.index >= 0 {
		heap.Remove(&cs.h, c.index)
	}
	delete(cs.byKey, c.key)
	cs.scored[c.key] = true
}

// refresh recomputes c's bound: the best case its known entries admit,
// with each unknown term bounded by its unread rows of c's prior class;
// a candidate some word of which has no such row left cannot match.
func (cs *candidates) refresh(c *candidate) {
	q := cs.cs.p.Query
	best := -1.0
	for _, sc := range cs.cs.all {
		possible := true
		for i := range q.Terms {
			r := allReqs[sc.reqs[i]]
			if c.known[i] {
				if !r.admits(c.flags[i]) {
					possible = false
					break
				}
				cs.tf[i] = c.tf[i]
				continue
			}
			t := &cs.cs.tops[i]
			if t.top[c.prior][sc.reqs[i]] == nil {
				if q.Word[i] {
					possible = false
					break
				}
				cs.tf[i] = 0
				continue
			}
			cs.tf[i] = t.bound[c.prior][sc.reqs[i]]
		}
		if possible {
			best = max(best, cs.cs.p.Params.Bound(q, cs.cs.idf, cs.tf, sc.titleAll, sc.anchorAll, cs.b.Prior(c.prior)))
		}
	}
	if best < 0 {
		cs.drop(c)
		return
	}
	c.bound, c.epoch = best, cs.epoch
	heap.Fix(&cs.h, c.index)
}

// candHeap orders candidates by bound, best first.
type candHeap []*candidate

func (h candHeap) Len() int           { return len(h) }
func (h candHeap) Less(i, j int) bool { return h[i].bound > h[j].bound }
func (h candHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *candHeap) Push(x any) {
	c := x.(*candidate)
	c.index = len(*h)
	*h = append(*h, c)
}
func (h *candHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	c.index = -1
	*h = old[:len(old)-1]
	return c
}
