package sample

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
)

// Op is the kind of a Change.
type Op uint8

const (
	// Put replaces the body of a page that was loaded before the Step.
	Put Op = iota + 1
	// Add loads a page that was not loaded before the Step: a page deleted
	// by an earlier Step coming back, or a new page (whose URL other pages
	// may have linked to while it did not exist).
	Add
	// Delete unloads a page.
	Delete
)

// String returns "put", "add" or "delete".
func (o Op) String() string {
	switch o {
	case Put:
		return "put"
	case Add:
		return "add"
	case Delete:
		return "delete"
	}
	return "Op(?)"
}

// Change is one page load or delete of a Step.
type Change struct {
	Op  Op
	URL string
	// HTML is the page's new body; nil for Delete.
	HTML []byte
}

// Step changes the corpus as a crawler revisiting the web would see it, and
// returns the changes that take a loader from the corpus before the Step to
// the corpus after it. About fraction of the loaded pages are involved
// (at least one). Each URL appears in at most one Change, so the changes
// may be applied in any order. Equal corpora stepped with equal seeds and
// fractions change identically.
//
// The changes mix text edits (a page leaves its duplicate cluster), link
// edits, pages becoming exact copies of other pages (joining a cluster),
// deletes, re-adds of deleted pages, new pages at URLs that dangling links
// already point to, and "moves": every link to a duplicated page is
// redirected to another member of its cluster, which usually changes the
// cluster's canonical.
func (c *Corpus) Step(seed int64, fraction float64) []Change {
	if c.orig == 0 {
		return nil
	}
	g := newGenerator(c, rand.New(rand.NewPCG(uint64(seed), 0x57e9)))
	g.zipf = rand.NewZipf(g.r, 1.2, 1, uint64(c.orig-1))
	type snapshot struct {
		c    *content
		live bool
	}
	start := map[*doc]snapshot{}
	var touched []*doc
	touch := func(d *doc) {
		if _, ok := start[d]; !ok {
			start[d] = snapshot{d.c, d.live}
			touched = append(touched, d)
		}
	}
	var deleted []*doc // before this Step: pages deleted now stay deleted
	for _, d := range c.docs {
		if !d.live {
			deleted = append(deleted, d)
		}
	}
	ops := max(1, int(math.Round(fraction*float64(c.Len()))))
	moves := max(1, ops/20)
	g.move(moves, touch)
	for range ops - moves {
		switch x := g.r.IntN(100); {
		case x < 28: // text edit
			if d := g.liveDoc(); d != nil {
				touch(d)
				d.c = g.editWords(d.c, 1+g.r.IntN(3))
			}
		case x < 43: // link edit
			if d := g.liveDoc(); d != nil {
				touch(d)
				d.c = g.editLinks(d)
			}
		case x < 55: // become an exact copy of another page
			if d, src := g.liveDoc(), g.liveDoc(); d != nil && d != src {
				touch(d)
				d.c = src.c
			}
		case x < 70: // delete
			if d := g.liveDoc(); d != nil {
				touch(d)
				d.live = false
			}
		case x < 85 && len(deleted) > 0: // re-add, sometimes edited
			i := g.r.IntN(len(deleted))
			d := deleted[i]
			deleted = slices.Delete(deleted, i, i+1)
			touch(d)
			d.live = true
			if g.r.IntN(3) == 0 {
				d.c = g.editWords(d.c, 1)
			}
		default: // a new page; the first newPool ones are linked to already
			u := c.newURL(c.nextNew)
			c.nextNew++
			if c.byURL[u] != nil {
				break
			}
			d := c.add(u, (c.nextNew-1)%c.opts.Hosts)
			touch(d)
			d.c = g.content(d)
			d.live = true
		}
	}

	var changes []Change
	for _, d := range touched {
		s := start[d]
		switch {
		case s.live && d.live:
			if body := render(d); !bytes.Equal(body, renderContent(s.c, d.base)) {
				changes = append(changes, Change{Op: Put, URL: d.url, HTML: body})
			}
		case d.live:
			changes = append(changes, Change{Op: Add, URL: d.url, HTML: render(d)})
		case s.live:
			changes = append(changes, Change{Op: Delete, URL: d.url})
		}
	}
	return changes
}

// liveDoc returns a random loaded page, or nil if there seem to be none.
func (g *generator) liveDoc() *doc {
	for range 100 {
		if d := g.c.docs[g.r.IntN(len(g.c.docs))]; d.live {
			return d
		}
	}
	return nil
}

// editLinks returns a copy of d's content with some links pointing
// elsewhere (same anchor, so the text is unchanged) and, half the time, one
// link more (whose anchor changes the text).
func (g *generator) editLinks(d *doc) *content {
	e := *d.c
	e.links = slices.Clone(d.c.links)
	for range 1 + g.r.IntN(3) {
		if len(e.links) > 0 {
			e.links[g.r.IntN(len(e.links))].target = g.target(d)
		}
	}
	if g.r.IntN(2) == 0 {
		e.links = append(e.links, g.link(d, e.stub))
	}
	return &e
}

// move performs up to n moves: for a page Y sharing its content with other
// loaded pages, every loaded page linking to Y links to X, another page
// with that content, instead. Pages linked to by more than 50 contents
// (hubs) are not moved, to keep a Step's size near its fraction.
func (g *generator) move(n int, touch func(*doc)) {
	sharing := map[*content][]*doc{} // content -> loaded pages using it
	for _, d := range g.c.docs {
		if d.live {
			sharing[d.c] = append(sharing[d.c], d)
		}
	}
	// Candidates: the shortest URL of each group, likely its canonical.
	to := map[string]string{} // Y -> X
	for _, d := range g.c.docs {
		group := sharing[d.c]
		if !d.live || len(group) < 2 || group[0] != d {
			continue
		}
		y := slices.MinFunc(group, func(a, b *doc) int { return len(a.url) - len(b.url) })
		x := group[g.r.IntN(len(group))]
		if x == y {
			x = group[(slices.Index(group, y)+1)%len(group)]
		}
		to[y.url] = x.url
	}
	sources := map[string][]*content{} // Y -> distinct contents linking to it
	for _, d := range g.c.docs {
		if !d.live || sharing[d.c][0] != d {
			continue
		}
		seen := map[string]bool{}
		for _, l := range d.c.links {
			if _, ok := to[l.target]; ok && !seen[l.target] {
				seen[l.target] = true
				sources[l.target] = append(sources[l.target], d.c)
			}
		}
	}
	var ys []string
	for _, d := range g.c.docs { // in doc order, for determinism
		if s := sources[d.url]; len(s) > 0 && len(s) <= 50 {
			ys = append(ys, d.url)
		}
	}
	chosen := map[string]string{}
	for range min(n, len(ys)) {
		i := g.r.IntN(len(ys))
		chosen[ys[i]] = to[ys[i]]
		ys = slices.Delete(ys, i, i+1)
	}
	rewritten := map[*content]*content{}
	for _, d := range g.c.docs { // in doc order, for determinism
		if _, ok := chosen[d.url]; !ok {
			continue
		}
		for _, old := range sources[d.url] {
			if rewritten[old] != nil {
				continue
			}
			e := *old
			e.links = slices.Clone(old.links)
			for i, l := range e.links {
				if x, ok := chosen[l.target]; ok {
					e.links[i].target = x
				}
			}
			rewritten[old] = &e
			for _, s := range sharing[old] {
				touch(s)
				s.c = &e
			}
		}
	}
}
