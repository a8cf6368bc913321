package webindex_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"gonum.org/v1/gonum/graph/network"
	"gonum.org/v1/gonum/graph/simple"
)

// testTolerance is the ε the PageRank tests run with. Every change costs
// hundreds of observer transactions, which the race detector makes many
// times slower, so under it the tests push less (a larger ε, checked
// against its own, looser bound) on smaller corpora (prPages).
var testTolerance = map[bool]float64{false: 1e-3, true: 1e-2}[indextest.RaceEnabled]

func prPages(n int) int {
	if indextest.RaceEnabled {
		return n / 3
	}
	return n
}

// prSettle waits for the observers of a PageRank test, with a deadline
// that allows for the race detector.
func prSettle(e *indextest.Env) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := e.FW.WaitForObservers(ctx); err != nil {
		e.T.Fatal(err)
	}
}

func pageRankOptions() *webindex.Options {
	return &webindex.Options{PageRank: &webindex.PageRankOptions{Tolerance: testTolerance}}
}

// prBound is the largest relative error of a normalized PageRank estimate
// the package documentation promises for tolerance eps.
func prBound(eps float64) float64 {
	d := eps / (1 - ranking.Damping)
	return 2 * d / (1 - d)
}

// oraclePageRank computes the PageRank of the loaded pages (summing to 1)
// with gonum, by power iteration to convergence, over the graph the index
// documents: an edge for each distinct link to another loaded page;
// gonum sends a dangling page's mass uniformly to all pages.
func oraclePageRank(t *testing.T, html map[string]string) map[string]float64 {
	t.Helper()
	urls := slices.Sorted(func(yield func(string) bool) {
		for u := range html {
			if !yield(u) {
				return
			}
		}
	})
	id := make(map[string]int64, len(urls))
	g := simple.NewDirectedGraph()
	for i, u := range urls {
		id[u] = int64(i)
		g.AddNode(simple.Node(i))
	}
	for i, u := range urls {
		p, err := extract.Parse(u, strings.NewReader(html[u]), sample.MaxBody)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range p.Links {
			j, loaded := id[l.Target]
			if loaded && j != int64(i) && !g.HasEdgeFromTo(int64(i), j) {
				g.SetEdge(g.NewEdge(simple.Node(i), simple.Node(j)))
			}
		}
	}
	ranks := network.PageRankSparse(g, ranking.Damping, 1e-13)
	out := make(map[string]float64, len(urls))
	for i, u := range urls {
		out[u] = ranks[int64(i)]
	}
	return out
}

// prErrors compares the index's normalized PageRank estimates of the
// loaded pages (html) with the oracle's.
type prErrors struct {
	max, mean, maxRel float64
	// violations are the pages whose error exceeds the bound.
	violations []string
}

func pageRankErrors(e *indextest.Env, html map[string]string, eps float64) prErrors {
	t := e.T.(*testing.T)
	t.Helper()
	want := oraclePageRank(t, html)
	got := map[string]float64{}
	var sum float64
	err := e.DB.View(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		for u := range html {
			r, err := schema.PageRankOf(ctx, tx, u)
			if err != nil {
				return err
			}
			got[u] = r
			sum += r
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var pe prErrors
	bound := prBound(eps)
	for u, w := range want {
		g := got[u] / sum
		d := math.Abs(g - w)
		pe.max = max(pe.max, d)
		pe.mean += d / float64(len(want))
		pe.maxRel = max(pe.maxRel, d/w)
		// 1e-9 allows for the oracle's own convergence error.
		if d > w*bound+1e-9 {
			pe.violations = append(pe.violations, fmt.Sprintf("%s: %.6g, want %.6g (error %.3g > %.3g)", u, g, w, d, w*bound))
		}
	}
	slices.Sort(pe.violations)
	return pe
}

// prStep loads changes, lets PageRank settle and checks it against the
// batch computation of pc with the changes applied; step names the step.
func prStep(e *indextest.Env, pc *prCorpus, changes map[string]string, step string) {
	e.T.Helper()
	e.Load(changes)
	pc.apply(changes)
	prSettle(e)
	checkPageRank(e, pc.html, step)
}

// checkPageRank fails the test if any page's PageRank is off by more
// than the bound.
func checkPageRank(e *indextest.Env, html map[string]string, step string) {
	t := e.T.(*testing.T)
	t.Helper()
	pe := pageRankErrors(e, html, testTolerance)
	t.Logf("%s: %d pages, max abs error %.3g, mean %.3g, max relative %.3g (bound %.3g)",
		step, len(html), pe.max, pe.mean, pe.maxRel, prBound(testTolerance))
	for i, v := range pe.violations {
		if i == 5 {
			t.Errorf("%s: and %d more", step, len(pe.violations)-5)
			break
		}
		t.Errorf("%s: %s", step, v)
	}
}

// prCorpus is a generated corpus and the model of what is loaded.
type prCorpus struct {
	rng  *rand.Rand
	html map[string]string
}

func newPRCorpus(t *testing.T, seed int64, n int) (*prCorpus, *sample.Corpus) {
	c := sample.Generate(seed, n)
	pc := &prCorpus{rng: rand.New(rand.NewPCG(uint64(seed), 3)), html: map[string]string{}}
	for d := range c.All() {
		pc.html[d.URL] = string(d.HTML)
	}
	return pc, c
}

func (pc *prCorpus) urls() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for u := range pc.html {
			if !yield(u) {
				return
			}
		}
	})
}

// relink returns changes that give a fraction of the loaded pages new
// text and new outlinks (0 to 6 random loaded pages, some repeated, some
// self-links, some to URLs never loaded): every old link is removed.
func (pc *prCorpus) relink(fraction float64) map[string]string {
	urls := pc.urls()
	changes := map[string]string{}
	for _, u := range urls {
		if pc.rng.Float64() >= fraction {
			continue
		}
		var b strings.Builder
		fmt.Fprintf(&b, "<title>relinked %s</title><p>relinked page %d</p>", u, pc.rng.IntN(1000))
		for range pc.rng.IntN(7) {
			target := urls[pc.rng.IntN(len(urls))]
			switch pc.rng.IntN(6) {
			case 0:
				target = u
			case 1:
				target = fmt.Sprintf("http://never-loaded.example/%d", pc.rng.IntN(50))
			}
			fmt.Fprintf(&b, `<a href="%s">x</a>`, target)
			if pc.rng.IntN(5) == 0 {
				fmt.Fprintf(&b, `<a href="%s">again</a>`, target)
			}
		}
		changes[u] = b.String()
	}
	return changes
}

func (pc *prCorpus) apply(changes map[string]string) {
	for u, h := range changes {
		if h == "" {
			delete(pc.html, u)
		} else {
			pc.html[u] = h
		}
	}
}

func stepChanges(changes []sample.Change) map[string]string {
	m := map[string]string{}
	for _, ch := range changes {
		m[ch.URL] = string(ch.HTML) // "" for a delete
	}
	return m
}

// TestPageRankMatchesPowerIteration loads a generated corpus with PageRank
// on, changes it (generated steps, pages relinked, pages deleted and
// re-added) and after every step checks every page's PageRank against
// gonum's power iteration over the pages loaded at that point.
func TestPageRankMatchesPowerIteration(t *testing.T) {
	e := indextest.NewWith(t, pageRankOptions())
	pc, c := newPRCorpus(t, 11, prPages(120))
	e.Load(pc.html)
	prSettle(e)
	checkPageRank(e, pc.html, "initial load")

	for i := range 3 {
		changes := stepChanges(c.Step(int64(100+i), 0.05))
		prStep(e, pc, changes, fmt.Sprintf("generated step %d (%d changes)", i+1, len(changes)))
	}

	changes := pc.relink(0.15)
	prStep(e, pc, changes, fmt.Sprintf("outlinks changed (%d pages)", len(changes)))

	deleted := map[string]string{}
	gone := map[string]string{}
	for _, u := range pc.urls() {
		if pc.rng.IntN(6) == 0 {
			deleted[u], gone[u] = pc.html[u], ""
		}
	}
	prStep(e, pc, gone, fmt.Sprintf("deleted %d pages", len(gone)))

	prStep(e, pc, deleted, fmt.Sprintf("re-added %d pages", len(deleted)))

	// Loads that race with the observers: change pages again before the
	// first changes are indexed.
	changes = pc.relink(0.1)
	e.Load(changes)
	pc.apply(changes)
	changes = stepChanges(c.Step(200, 0.05))
	prStep(e, pc, changes, "overlapping changes")

	s := e.FW.Stats()
	t.Logf("observer transactions %d, committed %d, conflicts %d (%.2f%%)", s.Runs, s.Committed, s.Conflicts,
		100*float64(s.Conflicts)/float64(max(1, s.Committed)))
}

// TestPageRankNeedsRetraction shows what taking back the rank sent along
// removed outlinks is for: an index that skips it is correct after the
// initial load, and outside the bound once outlinks change.
func TestPageRankNeedsRetraction(t *testing.T) {
	ix, err := webindex.NewWithoutRetraction(pageRankOptions())
	if err != nil {
		t.Fatal(err)
	}
	e := indextest.NewWithIndex(t, ix)
	pc, _ := newPRCorpus(t, 12, prPages(120))
	e.Load(pc.html)
	prSettle(e)
	if pe := pageRankErrors(e, pc.html, testTolerance); len(pe.violations) > 0 {
		t.Fatalf("initial load (nothing to retract): %d pages outside the bound, first %s", len(pe.violations), pe.violations[0])
	}
	changes := pc.relink(0.2)
	e.Load(changes)
	pc.apply(changes)
	prSettle(e)
	pe := pageRankErrors(e, pc.html, testTolerance)
	t.Logf("without retraction: max abs error %.3g, max relative %.3g (bound %.3g), %d of %d pages outside it",
		pe.max, pe.maxRel, prBound(testTolerance), len(pe.violations), len(pc.html))
	if len(pe.violations) == 0 {
		t.Fatal("ranks stayed within the bound without retracting removed outlinks: the check cannot tell")
	}
}

// Pitfall: a page everyone links to receives residual from all of them;
// accumulated in one cell, every push into it would conflict with every
// other. Here 300 pages link to one hub, and the hub links back to a few
// of them, so that rank flows both ways; 16 concurrent observers index
// them.
func TestPageRankHotPage(t *testing.T) {
	e := indextest.NewWith(t, pageRankOptions())
	const n = 300
	hub := "http://hub.example/"
	html := map[string]string{hub: `<title>Hub</title>the hub <a href="http://s1.example/">1</a><a href="http://s2.example/">2</a>`}
	for i := range n {
		html[fmt.Sprintf("http://s%d.example/", i)] = fmt.Sprintf(`page %d <a href="%s">hub</a>`, i, hub)
	}
	e.Load(html)
	prSettle(e)
	checkPageRank(e, html, "hub")
	s := e.FW.Stats()
	rate := 100 * float64(s.Conflicts) / float64(max(1, s.Committed))
	t.Logf("%d observer transactions, %d committed, %d conflicts (%.2f%%)", s.Runs, s.Committed, s.Conflicts, rate)
	if s.Conflicts > n/10 {
		t.Errorf("%d conflicts indexing %d pages that push into one hub", s.Conflicts, n)
	}
}

// TestPageRankRanker checks that canonicals follow PageRank, not inlink
// counts: of two duplicates, one has three inlinks from pages nobody links
// to, the other one inlink from a hub. Once twenty pages link to the hub,
// the second outranks the first, though no link into their cluster
// changed: only the pushed ranks tell its cluster to recompute.
func TestPageRankRanker(t *testing.T) {
	many, one := "http://many.example/a", "http://one-inlink.example/b"
	html := map[string]string{
		many:                   "<p>the same text</p>",
		one:                    "<p>the same text</p>",
		"http://hub.example/":  `hub <a href="` + one + `">x</a>`,
		"http://low1.example/": `low 1 <a href="` + many + `">x</a>`,
		"http://low2.example/": `low 2 <a href="` + many + `">x</a>`,
		"http://low3.example/": `low 3 <a href="` + many + `">x</a>`,
	}
	fans := map[string]string{}
	for i := range 20 {
		fans[fmt.Sprintf("http://fan%d.example/", i)] = fmt.Sprintf(`fan %d <a href="http://hub.example/">x</a>`, i)
	}
	for _, tc := range []struct {
		ranker ranking.Ranker
		after  string // the canonical once the fans are loaded
	}{{ranking.InlinkCount{}, many}, {ranking.PageRankRanker{}, one}} {
		t.Run(fmt.Sprintf("%T", tc.ranker), func(t *testing.T) {
			opts := pageRankOptions()
			opts.Ranker = tc.ranker
			e := indextest.NewWith(t, opts)
			canonical := func(step, want string) {
				t.Helper()
				for _, u := range []string{many, one} {
					pv, err := e.Index.Page(context.Background(), e.DB, u)
					if err != nil {
						t.Fatal(err)
					}
					if pv.Canonical != want {
						t.Errorf("%s: %s: canonical %s (rank %d), want %s", step, u, pv.Canonical, pv.Rank, want)
					}
				}
				// The top list shows the canonical the cluster observer
				// stored, not one computed on reading.
				top, err := e.Index.Top(context.Background(), e.DB, 100)
				if err != nil {
					t.Fatal(err)
				}
				var listed []string
				for _, r := range top {
					if r.URL == many || r.URL == one {
						listed = append(listed, r.URL)
					}
				}
				if len(listed) != 1 || listed[0] != want {
					t.Errorf("%s: the top list shows %v of the cluster, want %s", step, listed, want)
				}
			}
			html := maps.Clone(html)
			e.Load(html)
			prSettle(e)
			canonical("before the fans", many)
			e.Load(fans)
			maps.Copy(html, fans)
			prSettle(e)
			canonical("after the fans", tc.after)
			checkPageRank(e, html, "ranker")
		})
	}
}

func TestPageRankOptions(t *testing.T) {
	for _, tc := range []struct {
		opts webindex.Options
		want string
	}{
		{webindex.Options{PageRank: &webindex.PageRankOptions{Tolerance: -1e-3}}, "Tolerance -0.001"},
		{webindex.Options{PageRank: &webindex.PageRankOptions{Tolerance: math.NaN()}}, "Tolerance NaN"},
		{webindex.Options{PageRank: &webindex.PageRankOptions{Tolerance: 1}}, "Tolerance 1"},
		{webindex.Options{Ranker: ranking.PageRankRanker{}}, "PageRankRanker needs Options.PageRank"},
	} {
		_, err := webindex.New(&tc.opts)
		if !errors.Is(err, webindex.ErrInvalidOptions) || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions naming %q", tc.opts, err, tc.want)
		}
	}
	o := webindex.Options{PageRank: &webindex.PageRankOptions{}}
	if o.EnsureDefaults(); o.PageRank.Tolerance != 1e-3 {
		t.Errorf("default tolerance %v, want 1e-3", o.PageRank.Tolerance)
	}
}

// TestPageRankCorruptState checks that a damaged PageRank cell is reported
// with its URL rather than ranked.
func TestPageRankCorruptState(t *testing.T) {
	e := indextest.NewWith(t, pageRankOptions())
	u := "http://a.example/"
	err := e.DB.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set(schema.PagesTable, []byte(u), schema.PRStateCol, []byte{1, 0, 1, 2})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.DB.View(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		_, err := schema.PageRankOf(ctx, tx, u)
		return err
	})
	if !errors.Is(err, schema.ErrCorrupt) || !strings.Contains(err.Error(), u) {
		t.Fatalf("reading a truncated state: %v, want ErrCorrupt naming %s", err, u)
	}
}

// TestPageRankAfterBulkLoad bulk-loads a generated corpus with PageRank
// on, then changes it page by page: the imported PageRank must be within
// the bound at once, and the observers must carry it on from there.
func TestPageRankAfterBulkLoad(t *testing.T) {
	e := indextest.NewWith(t, pageRankOptions())
	pc, c := newPRCorpus(t, 13, prPages(150))
	pages, err := c.Pages()
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Index.BulkLoad(context.Background(), e.DB, pages, nil)
	if err != nil {
		t.Fatal(err)
	}
	prSettle(e)
	runs := e.FW.Stats().Runs
	checkPageRank(e, pc.html, fmt.Sprintf("bulk load of %d pages", st.Pages))
	for i := range 2 {
		changes := stepChanges(c.Step(int64(300+i), 0.05))
		prStep(e, pc, changes, fmt.Sprintf("after the bulk load, step %d (%d changes)", i+1, len(changes)))
	}
	changes := pc.relink(0.15)
	prStep(e, pc, changes, fmt.Sprintf("after the bulk load, outlinks changed (%d pages)", len(changes)))
	t.Logf("%d observer transactions after the bulk load itself, %d for the changes", runs, e.FW.Stats().Runs-runs)
}
