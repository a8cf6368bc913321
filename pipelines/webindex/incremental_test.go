package webindex_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// corpus is the test's model of what is loaded: URL → HTML.
type corpus struct {
	rng   *rand.Rand
	pages map[string]string
	urls  []string // every URL the corpus may use, loaded or not
}

var vocab = strings.Fields("apple banana cherry date elder fig grape honeydew kiwi lemon mango nectarine olive papaya quince")

func newCorpus(seed uint64, n int) *corpus {
	c := &corpus{rng: rand.New(rand.NewPCG(seed, 7)), pages: map[string]string{}}
	for i := range n {
		c.urls = append(c.urls, fmt.Sprintf("http://h%d.example/p%d", i%7, i))
	}
	return c
}

// html makes a page for u. Texts come from a small pool so that exact
// duplicates are common; near-duplicates differ in one word. Links go to
// loaded pages, to URLs never loaded (dangling), to u itself, and to
// several members of one cluster; anchors come from a small pool so that
// duplicates may link differently yet share their text.
func (c *corpus) html(u string) string {
	r := c.rng
	var b strings.Builder
	switch k := r.IntN(10); {
	case k == 0: // no text at all: a cluster of its own
		fmt.Fprintf(&b, `<a href="%s"><img src="x.png"></a>`, c.urls[r.IntN(len(c.urls))])
		return b.String()
	case k < 6: // one of a few shared texts: exact duplicates
		fmt.Fprintf(&b, "<title>T%d</title><p>%s %s</p>", k, vocab[k], vocab[k+1])
	default: // a near-duplicate or a unique text
		title := fmt.Sprintf("T%d", k)
		if k == 9 { // longer than a result title: cut inside a character
			title = "x" + strings.Repeat("ü", schema.MaxTitleBytes/2+3)
		}
		// Some texts hold an identifier (a compound term).
		fmt.Fprintf(&b, "<title>%s</title><p>%s %s %s %s</p>", title, vocab[k], vocab[r.IntN(len(vocab))], vocab[r.IntN(3)],
			[]string{"", "apple_pie", "kiwi.lemon", "fig::grape"}[r.IntN(4)])
	}
	b.WriteString(`<script>var hidden = "kiwi";</script>`)
	for range r.IntN(6) {
		target := c.urls[r.IntN(len(c.urls))]
		switch r.IntN(8) {
		case 0:
			target = u // self link: never counted
		case 1:
			target = fmt.Sprintf("http://dangling.example/%d", r.IntN(20))
		case 2:
			target = strings.Replace(target, "http://", "HTTP://", 1) + "#frag" // normalizes to target
		}
		// Anchors: none, a few shared words (a navigation bar's), or
		// words of the texts, so that anchor text matches and scores.
		anchor := []string{"", "link", "more", "apple guide", vocab[r.IntN(len(vocab))], "apple_pie recipe"}[r.IntN(6)]
		fmt.Fprintf(&b, `<a href="%s">%s</a>`, target, anchor)
	}
	return b.String()
}

func (c *corpus) apply(changes map[string]string) {
	for u, h := range changes {
		if h == "" {
			delete(c.pages, u)
		} else {
			c.pages[u] = h
		}
	}
}

// expected computes the index of the corpus from scratch.
func (c *corpus) expected(t *testing.T) *batch.Index {
	pages := map[string]*extract.Page{}
	for u, h := range c.pages {
		p, err := extract.Parse(u, strings.NewReader(h), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		pages[p.URL] = p
	}
	return batch.Compute(pages)
}

// check compares every page, a set of searches and the top list with a
// batch computation of the corpus.
func (e *env) check(c *corpus, step string) {
	t := e.t.(*testing.T)
	t.Helper()
	queries := append(slices.Clone(vocab), "apple banana", "cherry date", "T1", "hidden", "", "nothing", "kiwi lemon mango", "x apple",
		"link", "more", "guide", "apple guide", "link apple", "apple_pie", "pie", "kiwi.lemon", "fig::grape recipe")
	checked, diffs, err := e.ix.Verify(context.Background(), e.db, c.expected(t), c.urls, queries, 20)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	for _, d := range diffs {
		t.Errorf("%s: %s", step, d)
	}
	if checked != len(c.pages) {
		t.Errorf("%s: checked %d pages, %d are loaded", step, checked, len(c.pages))
	}
}

// TestIncrementalEqualsBatch loads a corpus, then updates, deletes and
// re-adds pages, and after each step compares the whole index with a
// from-scratch computation of the pages loaded at that point.
func TestIncrementalEqualsBatch(t *testing.T) { runIncremental(t, newEnv(t), 160) }

// runIncremental runs TestIncrementalEqualsBatch on e with a corpus of
// pages URLs (at least 40).
func runIncremental(t *testing.T, e *env, pages int) {
	c := newCorpus(1, pages)

	initial := map[string]string{}
	for _, u := range c.urls[:pages*13/16] { // the rest stay dangling for now
		initial[u] = c.html(u)
	}
	// Several members of one cluster, each linked from one page.
	initial[c.urls[0]] = `<title>T9</title>twin <a href="` + c.urls[1] + `">a</a>`
	initial[c.urls[1]] = `<title>T9</title>twin <a href="` + c.urls[2] + `">a</a>`
	initial[c.urls[2]] = `<title>T9</title>twin <a href="` + c.urls[0] + `">a</a>`
	initial[c.urls[3]] = `<p>fan</p><a href="` + c.urls[0] + `">x</a><a href="` + c.urls[1] + `">y</a><a href="` + c.urls[2] + `">z</a>`
	e.load(initial)
	c.apply(initial)
	e.settle()
	e.check(c, "initial load")

	var deleted []string
	for step := range 4 {
		changes := map[string]string{}
		for _, u := range c.urls {
			switch r := c.rng.IntN(20); {
			case c.pages[u] == "" && slices.Contains(deleted, u) && r < 10:
				changes[u] = c.html(u) // re-add
			case c.pages[u] == "" && r == 0:
				changes[u] = c.html(u) // a dangling URL gets loaded
			case c.pages[u] != "" && r < 3:
				changes[u] = c.html(u) // update
			case c.pages[u] != "" && r < 5:
				changes[u] = "" // delete
				deleted = append(deleted, u)
			case c.pages[u] != "" && r == 5:
				changes[u] = c.pages[u] // unchanged reload
			}
		}
		if step == 2 {
			// Change the pages again before the observers have caught up.
			e.load(changes)
			c.apply(changes)
			for u := range changes {
				if c.rng.IntN(2) == 0 {
					changes[u] = c.html(u)
				}
			}
		}
		e.load(changes)
		c.apply(changes)
		e.settle()
		e.check(c, fmt.Sprintf("step %d (%d changes)", step+1, len(changes)))
	}
	s := e.fw.Stats()
	t.Logf("transactions committed %d, conflicts %d (%.2f%%)", s.Committed, s.Conflicts,
		100*float64(s.Conflicts)/float64(max(1, s.Committed)))
}

// TestIncrementalEqualsBatchWhileCollecting is TestIncrementalEqualsBatch
// with garbage collection running all along, at a fresh safe point
// every few milliseconds (the DB holds it below its own running
// transactions): folded queue entries, moved postings and top entries,
// acks and notifications are collected while the observers use them,
// and the index must still equal a from-scratch computation at every step.
func TestIncrementalEqualsBatchWhileCollecting(t *testing.T) {
	e := newEnv(t)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var rounds, compacted atomic.Int64
	wg.Go(func() {
		for ctx.Err() == nil {
			st, err := admin.GC(ctx, e.db, 0)
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("collecting: %v", err)
				}
				return
			}
			rounds.Add(1)
			if len(st.Compacted) > 0 {
				compacted.Add(1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	runIncremental(t, e, 160)
	stop()
	wg.Wait()
	t.Logf("%d collections, %d of them compacted", rounds.Load(), compacted.Load())
	if compacted.Load() == 0 && !frameworktest.OnTiKV() { // TiKV compacts by itself
		t.Error("no collection compacted anything: the test did not exercise them")
	}
}
