package postings

import (
	"context"

	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"
)

// Cursor yields the entries of one impact row, largest impact first.
type Cursor interface {
	// Next returns the next entry; false once the row is exhausted.
	Next(ctx context.Context) (Entry, bool, error)
}

// RunCursor is a cursor over the impact row of one run.
type RunCursor struct {
	Run    Run
	Cursor Cursor
}

// Candidate is a cluster to score, with the postings its entries read
// gave: Known[i] tells whether Body[i] and Anchor[i] are its postings
// under the query's term i (read from its entry in the term's row).
type Candidate struct {
	Cluster      string
	Known        []bool
	Body, Anchor []int64
}

// Collector scores the clusters a retrieval reads and keeps the best.
type Collector interface {
	// Evaluate scores each of the candidates exactly (each cluster is
	// passed once) and keeps those that rank among the best so far.
	Evaluate(ctx context.Context, cands []Candidate) error
	// Threshold returns the base score of the last result kept, and
	// whether as many as asked for are kept: a cluster not read yet can
	// only enter them with a higher score.
	Threshold() (score float64, full bool)
}

// Plan is one retrieval: a query's terms, each with the cursors of its
// impact rows, and what the score needs of the corpus.
type Plan struct {
	Params *scoring.Params // effective (scoring.Params.Effective)
	Query  *scoring.Query
	Corpus *scoring.Corpus
	// Runs[i] are the impact rows of Query.Terms[i].
	Runs [][]RunCursor
	// Batch is how many clusters are passed to Evaluate at first; each
	// batch doubles it, up to MaxBatch. Defaults: 32 and 128.
	Batch, MaxBatch int
}

// Outcome is what a retrieval did.
type Outcome struct {
	// Exhausted is true when every cluster that can match was evaluated:
	// the collector saw all matches.
	Exhausted bool
	// Entries is the number of impact entries read; Candidates the
	// distinct clusters passed to Evaluate.
	Entries, Candidates int
}

// head is a cursor with its next entry read.
type head struct {
	bound0 float64 // of the entry before next: what advance read last
	term   int     // the query term whose row it reads
	run    Run
	c      Cursor
	next   Entry
	bound  float64 // of next
	done   bool
}

// Run reads the entries of the query terms' rows, each time from the
// row whose next entry bounds the most of the best score a cluster not
// met yet could have, and has col score the clusters it meets, best
// bound first, until neither a cluster not met nor one met and not
// scored can beat col's threshold (then the best col kept are the best of
// all matches, in the order an exhaustive ranking gives them), or none
// can match the query.
//
// It is Fagin, Lotem and Naor's combined algorithm. A cluster not read in
// any row holds each term with a blended frequency at most the largest
// bound of the term's unread rows of its prior class, every word in its
// title only if each word has such a row of entries with titles (and in
// its anchor text likewise), and matches only if each word has one
// holding it in text or anchors; scoring.Params.Bound of those, case by
// case, is its highest possible score. A cluster met in some rows is
// bounded the same way with what its entries read say of their terms;
// it is scored in bound order, in batches after bursts of reading, or
// dropped once its bound is below the threshold or it cannot match.
func (p *Plan) Run(ctx context.Context, col Collector) (Outcome, error) {
	var out Outcome
	bounds := NewBounds(p.Params, p.Corpus)
	idf := make([]float64, len(p.Query.Terms))
	heads := make([][]*head, len(p.Runs))
	for i, rs := range p.Runs {
		if i < len(p.Corpus.DF) {
			idf[i] = p.Corpus.IDF(i)
		}
		for _, r := range rs {
			h := &head{run: r.Run, c: r.Cursor, term: i}
			if err := h.advance(ctx, bounds); err != nil {
				return out, err
			}
			heads[i] = append(heads[i], h)
		}
	}
	batch, maxBatch := p.Batch, p.MaxBatch
	if batch <= 0 {
		batch = 32
	}
	if maxBatch < batch {
		maxBatch = max(batch, 128)
	}
	cs := newCases(p, idf)
	for i, hs := range heads {
		cs.update(i, hs)
	}
	cands := newCandidates(cs, bounds)
	discarded := false // a candidate that may match was never scored
	// Rows are read in bursts between scorings: a row's entry costs a
	// fraction of scoring a cluster, and the more is read, the more the
	// bounds of the candidates met fall below the threshold unscored.
	const burst = 64
	read := 0
	for {
		unseen := cs.bound(bounds)
		u := -1.0
		if unseen {
			u = cs.max
		}
		score, full := col.Threshold()
		top := cands.top()
		switch {
		case !unseen && top == nil:
			out.Exhausted = !discarded
			return out, nil
		case full && u < score && (top == nil || top.bound < score):
			return out, nil
		case top != nil && (!unseen || (full && u < score) || read >= burst || (!full && cands.len() >= batch)):
			// Score the best candidates, which raises the threshold.
			read = 0
			var keys []Candidate
			for len(keys) < batch {
				c := cands.top()
				if c == nil || (full && c.bound < score) {
					break
				}
				cands.pop()
				keys = append(keys, Candidate{Cluster: c.key, Known: c.known, Body: c.body, Anchor: c.anchor})
			}
			if len(keys) == 0 { // every candidate left is below the threshold
				discarded = discarded || cands.len() > 0
				cands.clear()
				continue
			}
			out.Candidates += len(keys)
			if err := col.Evaluate(ctx, keys); err != nil {
				return out, err
			}
			batch = min(2*batch, maxBatch)
			continue
		}
		h := cs.next
		e := h.next
		out.Entries++
		read++
		if err := h.advance(ctx, bounds); err != nil {
			return out, err
		}
		cs.update(h.term, heads[h.term])
		cands.read()
		cands.saw(e, h.term, h.run, h.bound0)
	}
}

// A field requirement of a case: any, held, or not held.
const (
	reqAny = iota
	reqHeld
	reqNot
)

// req is what a case requires of one term's entry: of its title and of
// its anchor text.
type req struct{ title, anchor int }

// index numbers the nine requirements.
func (r req) index() int { return 3*r.title + r.anchor }

func (r req) admits(f Flags) bool {
	ok := func(want int, has bool) bool { return want == reqAny || (want == reqHeld) == has }
	return ok(r.title, f&InTitle != 0) && ok(r.anchor, f&InAnchor != 0)
}

// allReqs are the nine requirements, by index.
var allReqs = func() (out [9]req) {
	for t := range 3 {
		for a := range 3 {
			out[3*t+a] = req{t, a}
		}
	}
	return out
}()

// scoreCase is one way an unread cluster can hold the query: whether
// its title holds every word and its anchor text does, and what that
// requires of each term's entry (by requirement index).
type scoreCase struct {
	titleAll, anchorAll bool
	reqs                []int
}

// termTops are, for one term, the largest bound of its unread rows and
// the head holding it, for each prior class and requirement.
type termTops struct {
	bound [PriorClasses + 1][9]float64
	top   [PriorClasses + 1][9]*head
}

// cases bounds the score of the clusters not read yet, case by case:
// the multiplier of a title or anchor text holding every word applies
// only to clusters whose entries of every word are in rows with titles
// (or anchors), a cluster without it has some word in a row without, and
// a cluster's entries are all in rows of its prior class; bounding each
// case by the rows it admits, with its own prior, is far tighter than
// bounding every cluster by the largest multiplier, prior and impacts.
type cases struct {
	p    *Plan
	idf  []float64
	all  []scoreCase
	tops []termTops
	tf   []float64
	// max is the bound of the last call to bound; next the head to read
	// to lower it.
	max  float64
	next *head
}

func newCases(p *Plan, idf []float64) *cases {
	q := p.Query
	var words []int
	for i := range q.Terms {
		if q.Word[i] {
			words = append(words, i)
		}
	}
	c := &cases{p: p, idf: idf, tops: make([]termTops, len(q.Terms)), tf: make([]float64, len(q.Terms))}
	mk := func(titleAll, anchorAll bool, noTitle, noAnchor int) {
		sc := scoreCase{titleAll: titleAll, anchorAll: anchorAll, reqs: make([]int, len(q.Terms))}
		for _, i := range words {
			var r req
			if titleAll {
				r.title = reqHeld
			}
			if anchorAll {
				r.anchor = reqHeld
			}
			if i == noTitle {
				r.title = reqNot
			}
			if i == noAnchor {
				r.anchor = reqNot
			}
			sc.reqs[i] = r.index()
		}
		c.all = append(c.all, sc)
	}
	mk(true, true, -1, -1)
	for _, j := range words {
		mk(true, false, -1, j)
		mk(false, true, j, -1)
		for _, k := range words {
			mk(false, false, j, k)
		}
	}
	if len(words) == 0 {
		mk(false, false, -1, -1)
	}
	return c
}

// update recomputes the tops of term i from its heads. A word's rows
// without text or anchors (title or URL alone) cannot make a cluster
// match, so they bound nothing for it.
func (c *cases) update(i int, hs []*head) {
	t := &c.tops[i]
	*t = termTops{}
	word := c.p.Query.Word[i]
	for _, h := range hs {
		if h.done || (word && h.run.Flags&(InBody|InAnchor) == 0) {
			continue
		}
		pc := min(h.run.PriorClass, PriorClasses)
		for ri, r := range allReqs {
			if r.admits(h.run.Flags) && (t.top[pc][ri] == nil || h.bound > t.bound[pc][ri]) {
				t.bound[pc][ri], t.top[pc][ri] = h.bound, h
			}
		}
	}
}

// bound computes the highest score a cluster not read yet can have (max)
// and the head whose reading lowers it most (next); false when no such
// cluster can match: every case needs a row some word has no more of.
func (c *cases) bound(b *Bounds) bool {
	q := c.p.Query
	c.max, c.next = -1, nil
	for pc := range PriorClasses + 1 {
		prior := b.Prior(uint8(pc))
		for _, sc := range c.all {
			possible := true
			var top *head
			w := -1.0
			for i := range q.Terms {
				t := &c.tops[i]
				h := t.top[pc][sc.reqs[i]]
				if h == nil {
					if q.Word[i] {
						possible = false
						break
					}
					c.tf[i] = 0
					continue
				}
				c.tf[i] = t.bound[pc][sc.reqs[i]]
				if c.idf[i]*c.tf[i] > w {
					top, w = h, c.idf[i]*c.tf[i]
				}
			}
			if !possible || top == nil {
				continue
			}
			if v := c.p.Params.Bound(q, c.idf, c.tf, sc.titleAll, sc.anchorAll, prior); v > c.max {
				c.max, c.next = v, top
			}
		}
	}
	return c.next != nil
}

// advance reads h's next entry.
func (h *head) advance(ctx context.Context, b *Bounds) error {
	e, ok, err := h.c.Next(ctx)
	if err != nil {
		return err
	}
	h.bound0 = h.bound
	if !ok {
		h.done, h.bound = true, 0
		return nil
	}
	h.next, h.bound = e, b.Bound(h.run, e.Impact)
	return nil
}
