package query_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/query"
)

// TestSearchAtEveryLimit compares searches of one, two and three terms at
// limits from none to all with the batch computation: the results kept
// while the matches stream by must be the first of the full ordering.
func TestSearchAtEveryLimit(t *testing.T) {
	e := indextest.New(t)
	c := indextest.NewCorpus(3, 120)
	pages := map[string]string{}
	for _, u := range c.URLs {
		pages[u] = c.HTML(u)
	}
	e.Load(pages)
	c.Apply(pages)
	e.Settle()
	want := c.Expected(t)
	ctx := context.Background()
	for _, q := range []string{"apple", "banana", "cherry", "cherry date", "apple banana", "kiwi lemon mango", "T1", "absent", "apple absent"} {
		for _, limit := range []int{0, 1, 2, 5, 17, 1000, -1} {
			total, got, err := e.Index.Search(ctx, e.DB, q, limit)
			if err != nil {
				t.Fatal(err)
			}
			wt, wres := want.Search(q, limit)
			var g, w []string
			for _, r := range got {
				g = append(g, fmt.Sprint(r.URL, r.Title, r.InboundCount, r.TextBytes))
			}
			for _, r := range wres {
				w = append(w, fmt.Sprint(r.URL, r.Title, r.InboundCount, r.TextBytes))
			}
			if total != wt || !slices.Equal(g, w) {
				t.Errorf("Search(%q, %d) = %d %v, want %d %v", q, limit, total, g, wt, w)
			}
		}
	}
}

func TestSearchRefusesTooManyTerms(t *testing.T) {
	e := indextest.New(t)
	e.Load(map[string]string{"http://a.example/": "<title>A</title>w0 w1"})
	e.Settle()
	var words []string
	for i := range query.MaxQueryTerms + 1 {
		words = append(words, fmt.Sprintf("w%d", i))
	}
	if total, _, err := e.Index.Search(context.Background(), e.DB, strings.Join(words[:query.MaxQueryTerms], " ")+" w0 W1", 10); err != nil || total != 0 {
		t.Errorf("search of %d distinct terms: %d %v", query.MaxQueryTerms, total, err)
	}
	_, _, err := e.Index.Search(context.Background(), e.DB, strings.Join(words, " "), 10)
	if !errors.Is(err, query.ErrBadQuery) || !strings.Contains(err.Error(), fmt.Sprint(query.MaxQueryTerms+1)) {
		t.Errorf("search of %d distinct terms: %v, want ErrBadQuery naming the count", len(words), err)
	}
	rec := indextest.Serve(t, e.Index.Handler(e.DB, indextest.Quiet), "/api/search?q="+url.QueryEscape(strings.Join(words, " ")), nil)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "distinct terms") {
		t.Errorf("API search of %d terms: %d %s", len(words), rec.Code, rec.Body)
	}
}

// hubCorpus is a small documentation site shaped like the real ones: a
// library overview page (the hub) that names every function of the
// library and that every page links to from its navigation bar, the pages
// about each function, linked from a few pages by their names, and
// pages that only mention them.
func hubCorpus() map[string]string {
	const base = "http://docs.example/cpp/"
	nav := `<nav><a href="` + base + `container.html">Containers library</a> <a href="` + base + `algorithm.html">Algorithms</a></nav>`
	var names []string
	for _, c := range []string{"vector", "deque", "list"} {
		for _, f := range []string{"push_back", "push_front", "insert", "erase", "size", "emplace_back"} {
			names = append(names, "std::"+c+"::"+f)
		}
	}
	pages := map[string]string{
		// The hub: every name of the library, twice, and links to them.
		base + "container.html": `<title>Containers library</title>` + nav + `<p>The containers library is a collection of class templates. ` +
			strings.Join(names, " ") + ` ` + strings.Join(names, ", ") + ` vector deque list containers.</p>`,
		base + "algorithm.html": `<title>Algorithms library</title>` + nav + `<p>std::sort std::find std::copy sort a vector with std::sort.</p>`,
		// The page about the query.
		base + "container/vector/push_back.html": `<title>std::vector::push_back</title>` + nav +
			`<p>Appends the given element value to the end of the container. If the new size is greater than capacity, all iterators are invalidated.</p>`,
		// The same function of another container.
		base + "container/deque/push_back.html": `<title>std::deque::push_back</title>` + nav +
			`<p>Appends the given element value to the end of the container. If the new size is greater than capacity, all iterators are invalidated.</p>`,
		// The class page: about vector, mentions push_back once.
		base + "container/vector.html": `<title>std::vector</title>` + nav +
			`<p>std::vector is a sequence container that encapsulates dynamic size arrays. Elements are added with push_back or insert.</p>`,
		// A page whose text lacks what its inlinks call it.
		base + "intro.html": `<title>Read this first</title>` + nav + `<p>Welcome.</p>`,
	}
	// Pages about other things link to the function pages by their names,
	// and to the introduction as the getting started guide.
	for i := range 8 {
		body := fmt.Sprintf(`<title>Example %d</title>`, i) + nav + `<p>An example of vector code.</p>` +
			`<a href="` + base + `container/vector/push_back.html">vector::push_back</a> ` +
			`<a href="` + base + `container/vector.html">std::vector</a> ` +
			`<a href="` + base + `intro.html">getting started guide</a>`
		if i < 3 {
			body += `<a href="` + base + `container/deque/push_back.html">deque::push_back</a>`
		}
		pages[fmt.Sprintf("%sexample%d.html", base, i)] = body
	}
	// Many sites link to the hub, and only to it.
	for i := range 30 {
		pages[fmt.Sprintf("http://blog%d.example/", i)] = fmt.Sprintf(`<title>Post %d</title><p>a post</p><a href="%scontainer.html">C++ containers</a>`, i, base)
	}
	return pages
}

// TestSearchRanksThePageAboutTheQueryFirst fixes the order of searches on
// hubCorpus: the page a query is about comes first, although the hub
// holds every query word more often and has several times its inbound
// links; the hub comes first for the query it is about; the anchor text
// of a page's inlinks finds it even where its own text does not hold the
// query; and the batch computation agrees to the last bit.
func TestSearchRanksThePageAboutTheQueryFirst(t *testing.T) {
	const base = "http://docs.example/cpp/"
	pages := hubCorpus()
	e := indextest.New(t)
	e.Load(pages)
	e.Settle()
	want := (&indextest.Corpus{Pages: pages}).Expected(t)
	for _, tc := range []struct {
		query string
		first []string // the first results, in order
	}{
		{"vector push_back", []string{"container/vector/push_back.html"}},
		{"vector::push_back", []string{"container/vector/push_back.html"}},
		{"std::vector::push_back", []string{"container/vector/push_back.html"}},
		{"push_back", []string{"container/vector/push_back.html", "container/deque/push_back.html"}},
		{"deque push_back", []string{"container/deque/push_back.html"}},
		{"containers library", []string{"container.html"}},
		{"std::sort", []string{"algorithm.html"}},
		{"getting started", []string{"intro.html"}},
	} {
		p, err := e.Index.SearchPage(context.Background(), e.DB, query.SearchRequest{Query: tc.query, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range p.Results {
			got = append(got, strings.TrimPrefix(r.URL, base))
		}
		if len(got) < len(tc.first) || !slices.Equal(got[:len(tc.first)], tc.first) {
			t.Errorf("search %q = %v, want %v first", tc.query, got, tc.first)
		}
		for i := 1; i < len(p.Results); i++ {
			if p.Results[i].Score > p.Results[i-1].Score {
				t.Errorf("search %q: scores rise at %d: %+v", tc.query, i, p.Results)
			}
		}
		wt, wres := want.Search(tc.query, 10)
		if wt != p.Total || !slices.EqualFunc(wres, p.Results, func(w batch.Result, g query.Result) bool { return w.URL == g.URL && w.Score == g.Score }) {
			t.Errorf("search %q: batch = %d %+v, incremental %d %+v", tc.query, wt, wres, p.Total, p.Results)
		}
	}
}

// TestSearchPriorBreaksTiesOnly checks that the link-based prior orders
// pages the text scores alike and cannot lift a hub over the page about
// the query: with the prior off the hub stays behind, and with it at full
// weight the better-linked of two equal pages comes first.
func TestSearchPriorBreaksTiesOnly(t *testing.T) {
	const base = "http://docs.example/cpp/"
	pages := hubCorpus()
	e := indextest.New(t)
	e.Load(pages)
	e.Settle()
	search := func(s webindex.Scoring, q string) []query.Result {
		t.Helper()
		ix, err := webindex.New(&webindex.Options{Scoring: s})
		if err != nil {
			t.Fatal(err)
		}
		p, err := ix.SearchPage(context.Background(), e.DB, query.SearchRequest{Query: q, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Results {
			p.Results[i].URL = strings.TrimPrefix(p.Results[i].URL, base)
		}
		return p.Results
	}
	// The hub holds both words and has 30 more inlinks; the page about
	// the query wins with the prior off, at its default weight, and at
	// five times it.
	for _, s := range []webindex.Scoring{{PriorWeight: -1}, {}, {PriorWeight: 0.5}} {
		if got := search(s, "vector push_back"); len(got) == 0 || got[0].URL != "container/vector/push_back.html" {
			t.Errorf("prior weight %v: %+v, want the vector push_back page first", s.PriorWeight, got)
		}
	}
	// Two pages whose texts score alike (the same words but for their
	// titles) differ only by the prior: the better-linked one (vector's,
	// 8 sources against deque's 3) scores higher with it, and the same
	// without it.
	const q = "appends the given element value"
	for _, tc := range []struct {
		s     webindex.Scoring
		ahead bool
	}{{webindex.Scoring{}, true}, {webindex.Scoring{PriorWeight: -1}, false}} {
		got := search(tc.s, q)
		if len(got) != 2 || got[0].URL != "container/vector/push_back.html" || got[1].URL != "container/deque/push_back.html" {
			t.Fatalf("prior weight %v: %+v, want the vector then the deque page", tc.s.PriorWeight, got)
		}
		if ahead := got[0].Score > got[1].Score; ahead != tc.ahead || !ahead && got[0].Score != got[1].Score {
			t.Errorf("prior weight %v: scores %v and %v", tc.s.PriorWeight, got[0].Score, got[1].Score)
		}
	}
}
