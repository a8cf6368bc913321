package postings_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/postings"
	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"
)

// doc is a cluster of a generated corpus, as the score sees it.
type doc struct {
	key                string
	body, anchor       map[string]int64
	bodyLen, anchorLen int64
	title, url         string
	prior              float64
	shape              postings.Shape
}

// memCursor is a cursor over an impact row held in memory.
type memCursor struct{ es []postings.Entry }

func (c *memCursor) Next(context.Context) (postings.Entry, bool, error) {
	if len(c.es) == 0 {
		return postings.Entry{}, false, nil
	}
	e := c.es[0]
	c.es = c.es[1:]
	return e, true, nil
}

type result struct {
	key   string
	score float64
}

func order(a, b result) int {
	return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(a.key, b.key))
}

// collector scores docs exactly and keeps the k best.
type collector struct {
	p      *scoring.Params
	q      *scoring.Query
	c      *scoring.Corpus
	docs   map[string]*doc
	k      int
	best   []result
	scored map[string]bool
	t      *testing.T
}

func (c *collector) Evaluate(_ context.Context, cands []postings.Candidate) error {
	for _, cand := range cands {
		k := cand.Cluster
		for i, t := range c.q.Terms {
			if cand.Known[i] && (cand.Body[i] != c.docs[k].body[t] || cand.Anchor[i] != c.docs[k].anchor[t]) {
				c.t.Errorf("%s under %q: entry says %d, %d; postings %d, %d", k, t, cand.Body[i], cand.Anchor[i], c.docs[k].body[t], c.docs[k].anchor[t])
			}
		}
		if c.scored[k] {
			c.t.Errorf("%s evaluated twice", k)
		}
		c.scored[k] = true
		if s, ok := score(c.p, c.q, c.c, c.docs[k]); ok {
			c.best = append(c.best, result{k, s})
		}
	}
	slices.SortFunc(c.best, order)
	c.best = c.best[:min(len(c.best), c.k)]
	return nil
}

func (c *collector) Threshold() (float64, bool) {
	if len(c.best) < c.k {
		return 0, false
	}
	return c.best[len(c.best)-1].score, true
}

// score is the base score of d if it matches q.
func score(p *scoring.Params, q *scoring.Query, c *scoring.Corpus, d *doc) (float64, bool) {
	sd := scoring.Doc{Body: make([]int64, len(q.Terms)), Anchor: make([]int64, len(q.Terms)), BodyLen: d.bodyLen, AnchorLen: d.anchorLen, Title: d.title, URL: d.url, Prior: d.prior}
	for i, t := range q.Terms {
		sd.Body[i], sd.Anchor[i] = d.body[t], d.anchor[t]
		if q.Word[i] && sd.Body[i] == 0 && sd.Anchor[i] == 0 {
			return 0, false
		}
	}
	return p.Base(q, c, &sd), true
}

// corpus generates n clusters over a small vocabulary, with shapes
// written at mean lengths that differ from the corpus's by up to drift.
func corpus(r *rand.Rand, n int, vocab []string, drift float64) (map[string]*doc, *scoring.Corpus, map[string]int64) {
	docs := map[string]*doc{}
	df := map[string]int64{}
	var words, anchors int64
	pick := func() string { return vocab[min(len(vocab)-1, int(r.ExpFloat64()*float64(len(vocab))/4))] }
	for i := range n {
		d := &doc{key: fmt.Sprintf("k%05d", i), body: map[string]int64{}, anchor: map[string]int64{}, prior: float64(r.IntN(2000) * r.IntN(2) * r.IntN(2))}
		nw := 1 + r.IntN(60) // only clusters with text are posted
		for range nw {
			d.body[pick()]++
		}
		d.bodyLen = int64(nw)
		for range r.IntN(6) {
			t := pick()
			d.anchor[t] = scoring.AnchorCount(int64(1 + r.IntN(40)))
		}
		for _, a := range d.anchor {
			d.anchorLen += a
		}
		var tw []string
		for range r.IntN(4) {
			tw = append(tw, pick())
		}
		d.title = strings.Join(tw, " ")
		d.url = "http://h.example/" + pick() + "/" + d.key + ".html"
		for t := range d.body {
			df[t]++
		}
		for t := range d.anchor {
			if d.body[t] == 0 {
				df[t]++
			}
		}
		words += d.bodyLen
		anchors += d.anchorLen
		docs[d.key] = d
	}
	c := scoring.NewCorpus(int64(n), words, anchors, nil)
	for _, d := range docs {
		f := 1 + (r.Float64()*2-1)*drift
		d.shape = postings.Shape{BodyLen: d.bodyLen, AnchorLen: d.anchorLen, BodyClass: postings.ClassOf(c.AvgBody * f), AnchorClass: postings.ClassOf(c.AvgAnchor * f)}
		if r.IntN(4) == 0 { // entries written when the anchor field was shorter
			d.shape.AnchorLen = r.Int64N(d.anchorLen + 1)
		}
		if r.IntN(10) == 0 {
			d.shape.BodyClass = postings.UnknownClass
		}
		// A prior class at least the prior's: higher when the rank fell.
		d.shape.PriorClass = min(postings.PriorClasses, postings.PriorClassOf(d.prior)+uint8(r.IntN(3)/2))
	}
	return docs, c, df
}

// rows lays the docs out as TermCells does: each term's impact rows.
func rows(docs map[string]*doc, terms []string) map[string]map[postings.Run][]postings.Entry {
	out := map[string]map[postings.Run][]postings.Entry{}
	for _, t := range terms {
		out[t] = map[postings.Run][]postings.Entry{}
	}
	for _, d := range docs {
		titles := postings.TitleTerms(d.title, d.url)
		for _, t := range terms {
			c := titles[t]
			c.Body, c.Anchor = d.body[t], d.anchor[t]
			if e, ok := postings.MakeEntry(d.key, c, d.shape); ok {
				out[t][e.Run] = append(out[t][e.Run], e)
			}
		}
	}
	for _, rs := range out {
		for _, es := range rs {
			sort.Slice(es, func(i, j int) bool { return es[i].Qualifier() < es[j].Qualifier() })
		}
	}
	return out
}

// TestTopKEqualsExhaustive checks, on random corpora, queries, depths and
// weights, that the retrieval's best are exactly those of scoring every
// match, in order.
func TestTopKEqualsExhaustive(t *testing.T) {
	vocab := []string{"alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma"}
	weights := []scoring.Params{{}, {BodyB: 0.3, AnchorWeight: 5}, {TitleWeight: 0.5, URLWeight: 9, BodyB: 1, K1: 3}, {BodyWeight: -1, PriorWeight: 0.5, PriorCap: 20}, {PriorCap: 1e6, PriorWeight: 2}}
	saved := 0
	for seed := range 60 {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		docs, corp, df := corpus(r, 200+r.IntN(800), vocab, []float64{0, 0.05, 0.5}[seed%3])
		for qi := range 8 {
			var qs []string
			for range 1 + r.IntN(3) {
				qs = append(qs, vocab[r.IntN(len(vocab)/2)])
			}
			query := strings.Join(qs, " ")
			q := scoring.NewQuery(extract.ParseQuery(query))
			p := weights[(seed+qi)%len(weights)].Effective()
			c := *corp
			c.DF = make([]int64, len(q.Terms))
			for i, t := range q.Terms {
				c.DF[i] = df[t]
			}
			k := []int{1, 10, 50, 200}[r.IntN(4)]
			var want []result
			for _, d := range docs {
				if s, ok := score(&p, q, &c, d); ok {
					want = append(want, result{d.key, s})
				}
			}
			slices.SortFunc(want, order)
			want = want[:min(len(want), k)]

			lay := rows(docs, q.Terms)
			plan := &postings.Plan{Params: &p, Query: q, Corpus: &c, Batch: 1 + r.IntN(40)}
			plan.Runs = make([][]postings.RunCursor, len(q.Terms))
			for i, term := range q.Terms {
				for run, es := range lay[term] {
					plan.Runs[i] = append(plan.Runs[i], postings.RunCursor{Run: run, Cursor: &memCursor{slices.Clone(es)}})
				}
			}
			col := &collector{p: &p, q: q, c: &c, docs: docs, k: k, scored: map[string]bool{}, t: t}
			out, err := plan.Run(context.Background(), col)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(col.best, want) {
				t.Fatalf("seed %d query %q k %d weights %+v: got %v, want %v", seed, query, k, weights[(seed+qi)%len(weights)], col.best, want)
			}
			if out.Exhausted && len(col.best) < k && len(want) != len(col.best) {
				t.Fatalf("exhausted with %d of %d", len(col.best), len(want))
			}
			saved += len(docs) - out.Candidates
		}
	}
	if saved <= 0 {
		t.Fatalf("the retrieval never skipped a cluster (%d)", saved)
	}
}

// TestClassHolds checks that a class's largest mean is at least every
// mean it is the class of, and that classes are ordered.
func TestClassHolds(t *testing.T) {
	last := uint8(0)
	for _, avg := range []float64{0.01, 0.5, 1, 1.0001, 3, 17.5, 100, 1e4, 1e9} {
		c := postings.ClassOf(avg)
		if postings.ClassHi(c) < avg || c < last {
			t.Fatalf("class %d of %v: largest %v", c, avg, postings.ClassHi(c))
		}
		last = c
	}
	if postings.ClassOf(0) != postings.UnknownClass {
		t.Fatal("mean 0 has a class")
	}
	for rank := range 3000 {
		c := postings.PriorClassOf(float64(rank))
		if c < 1 || c > postings.PriorClasses || (rank >= 1000 && c != postings.PriorClasses) || (rank <= 4 && c != 1) {
			t.Fatalf("rank %d has prior class %d", rank, c)
		}
	}
}

// TestEncodings checks that qualifiers, rows and values read back, and
// that qualifiers sort by impact descending.
func TestEncodings(t *testing.T) {
	r := postings.Run{Flags: postings.InBody | postings.InTitle, BodyClass: 70, AnchorClass: 0, PriorClass: 3}
	got, err := postings.ParseRunRow("term", postings.RunRow("term", r))
	if err != nil || got != r {
		t.Fatalf("run %+v read back as %+v, %v", r, got, err)
	}
	var quals []string
	for _, q := range []float32{0, 0.5, 1, 3.25, 100} {
		e := postings.Entry{Impact: q, Cluster: "c"}
		imp, cl, err := postings.ParseQualifier(e.Qualifier())
		if err != nil || imp != q || cl != "c" {
			t.Fatalf("impact %v read back as %v %q %v", q, imp, cl, err)
		}
		quals = append(quals, e.Qualifier())
	}
	if !slices.IsSortedFunc(quals, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Fatalf("qualifiers do not sort by impact descending: %q", quals)
	}
	for _, n := range []int64{1, 7, 1 << 40} {
		if v, err := postings.DecodePosting(postings.EncodePosting(n)); v != n || err != nil {
			t.Fatalf("posting %d: %d %v", n, v, err)
		}
		if v, err := postings.DecodeDF(postings.EncodeDF(n)); v != n || err != nil {
			t.Fatalf("df %d: %d %v", n, v, err)
		}
	}
	e := postings.Entry{Body: 12, Anchor: 1 << 33}
	var back postings.Entry
	if err := back.ParseValue(e.Value()); err != nil || back.Body != e.Body || back.Anchor != e.Anchor {
		t.Fatalf("entry value %+v read back as %+v, %v", e, back, err)
	}
	if err := back.ParseValue(nil); err == nil {
		t.Fatal("an empty entry value parsed")
	}
	if _, _, err := postings.ParseQualifier("zz"); err == nil {
		t.Fatal("a short qualifier parsed")
	}
}
