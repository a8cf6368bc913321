package webindex_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
)

// check compares every page, a set of searches and the top list with a
// batch computation of the corpus.
func check(e *indextest.Env, c *indextest.Corpus, step string) {
	t := e.T.(*testing.T)
	t.Helper()
	queries := append(slices.Clone(indextest.Vocab), "apple banana", "cherry date", "T1", "hidden", "", "nothing", "kiwi lemon mango", "x apple",
		"link", "more", "guide", "apple guide", "link apple", "apple_pie", "pie", "kiwi.lemon", "fig::grape recipe")
	checked, diffs, err := e.Index.Verify(context.Background(), e.DB, c.Expected(t), c.URLs, queries, 20)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	for _, d := range diffs {
		t.Errorf("%s: %s", step, d)
	}
	if checked != len(c.Pages) {
		t.Errorf("%s: checked %d pages, %d are loaded", step, checked, len(c.Pages))
	}
}

// TestIncrementalEqualsBatch loads a corpus, then updates, deletes and
// re-adds pages, and after each step compares the whole index with a
// from-scratch computation of the pages loaded at that point.
func TestIncrementalEqualsBatch(t *testing.T) { runIncremental(t, indextest.New(t), 160) }

// runIncremental runs TestIncrementalEqualsBatch on e with a corpus of
// pages URLs (at least 40).
func runIncremental(t *testing.T, e *indextest.Env, pages int) {
	c := indextest.NewCorpus(1, pages)

	initial := map[string]string{}
	for _, u := range c.URLs[:pages*13/16] { // the rest stay dangling for now
		initial[u] = c.HTML(u)
	}
	// Several members of one cluster, each linked from one page.
	initial[c.URLs[0]] = `<title>T9</title>twin <a href="` + c.URLs[1] + `">a</a>`
	initial[c.URLs[1]] = `<title>T9</title>twin <a href="` + c.URLs[2] + `">a</a>`
	initial[c.URLs[2]] = `<title>T9</title>twin <a href="` + c.URLs[0] + `">a</a>`
	initial[c.URLs[3]] = `<p>fan</p><a href="` + c.URLs[0] + `">x</a><a href="` + c.URLs[1] + `">y</a><a href="` + c.URLs[2] + `">z</a>`
	e.Load(initial)
	c.Apply(initial)
	e.Settle()
	check(e, c, "initial load")

	var deleted []string
	for step := range 4 {
		changes := map[string]string{}
		for _, u := range c.URLs {
			switch r := c.Rand.IntN(20); {
			case c.Pages[u] == "" && slices.Contains(deleted, u) && r < 10:
				changes[u] = c.HTML(u) // re-add
			case c.Pages[u] == "" && r == 0:
				changes[u] = c.HTML(u) // a dangling URL gets loaded
			case c.Pages[u] != "" && r < 3:
				changes[u] = c.HTML(u) // update
			case c.Pages[u] != "" && r < 5:
				changes[u] = "" // delete
				deleted = append(deleted, u)
			case c.Pages[u] != "" && r == 5:
				changes[u] = c.Pages[u] // unchanged reload
			}
		}
		if step == 2 {
			// Change the pages again before the observers have caught up.
			e.Load(changes)
			c.Apply(changes)
			for u := range changes {
				if c.Rand.IntN(2) == 0 {
					changes[u] = c.HTML(u)
				}
			}
		}
		e.Load(changes)
		c.Apply(changes)
		e.Settle()
		check(e, c, fmt.Sprintf("step %d (%d changes)", step+1, len(changes)))
	}
	s := e.FW.Stats()
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
	e := indextest.New(t)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var rounds, compacted atomic.Int64
	wg.Go(func() {
		for ctx.Err() == nil {
			st, err := admin.GC(ctx, e.DB, 0)
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
