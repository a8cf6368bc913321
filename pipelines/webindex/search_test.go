package webindex_test

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
)

// TestSearchAtEveryLimit compares searches of one, two and three terms at
// limits from none to all with the batch computation: the results kept
// while the matches stream by must be the first of the full ordering.
func TestSearchAtEveryLimit(t *testing.T) {
	e := newEnv(t)
	c := newCorpus(3, 120)
	pages := map[string]string{}
	for _, u := range c.urls {
		pages[u] = c.html(u)
	}
	e.load(pages)
	c.apply(pages)
	e.settle()
	want := c.expected(t)
	ctx := context.Background()
	for _, q := range []string{"apple", "banana", "cherry", "cherry date", "apple banana", "kiwi lemon mango", "T1", "absent", "apple absent"} {
		for _, limit := range []int{0, 1, 2, 5, 17, 1000, -1} {
			total, got, err := e.ix.Search(ctx, e.db, q, limit)
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
	e := newEnv(t)
	e.load(map[string]string{"http://a.example/": "<title>A</title>w0 w1"})
	e.settle()
	var words []string
	for i := range webindex.MaxQueryTerms + 1 {
		words = append(words, fmt.Sprintf("w%d", i))
	}
	if total, _, err := e.ix.Search(context.Background(), e.db, strings.Join(words[:webindex.MaxQueryTerms], " ")+" w0 W1", 10); err != nil || total != 0 {
		t.Errorf("search of %d distinct terms: %d %v", webindex.MaxQueryTerms, total, err)
	}
	_, _, err := e.ix.Search(context.Background(), e.db, strings.Join(words, " "), 10)
	if !errors.Is(err, webindex.ErrBadQuery) || !strings.Contains(err.Error(), fmt.Sprint(webindex.MaxQueryTerms+1)) {
		t.Errorf("search of %d distinct terms: %v, want ErrBadQuery naming the count", len(words), err)
	}
	rec := serve(t, e.ix.Handler(e.db, quiet), "/api/search?q="+url.QueryEscape(strings.Join(words, " ")), nil)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "distinct terms") {
		t.Errorf("API search of %d terms: %d %s", len(words), rec.Code, rec.Body)
	}
}

// TestSearchRanksThePageAboutTheQueryFirst fixes the order of a small
// hand-made corpus: the page about the query comes first although pages
// that only mention its terms have many more inbound links, a title match
// beats a match in the text alone, and among pages equally about the
// query the better-linked one wins. The batch computation agrees.
func TestSearchRanksThePageAboutTheQueryFirst(t *testing.T) {
	const base = "http://docs.example/library/"
	filler := strings.Repeat("reference manual section paragraph ", 20)
	pages := map[string]string{
		// About the query: title and text.
		base + "asyncio-eventloop.html": `<title>Event Loop — asyncio</title><p>The event loop is the core of every asyncio application. Event loops run asynchronous tasks; the loop also runs subprocesses. Get the event loop with asyncio.get_event_loop.</p>`,
		// Mentions every term once, in a long text, and is linked from everywhere.
		base + "index.html": `<title>Library index</title><p>` + filler + ` asyncio ` + filler + ` event ` + filler + ` loop ` + filler + `</p>`,
		// About the query in the text, not in the title.
		base + "asyncio-dev.html": `<title>Developing with asyncio</title><p>Debug mode of the event loop: asyncio logs slow event loop callbacks; loop.slow_callback_duration.</p>`,
		// Nearly the text of asyncio-dev, with one more inbound link.
		base + "asyncio-dev-copy.html": `<title>Developing with asyncio, too</title><p>Debug mode of the event loop: asyncio logs slow event loop callbacks; loop.slow_callback_duration. Copy.</p>`,
		// Has two of the three terms: not a match.
		base + "tkinter.html": `<title>Tk event loop</title><p>The Tk event loop.</p>`,
	}
	for i := range 12 {
		pages[fmt.Sprintf("http://blog%d.example/", i)] = fmt.Sprintf(`<title>Post %d</title><a href="%sindex.html">docs</a>`, i, base)
	}
	pages["http://blog0.example/"] += `<a href="` + base + `asyncio-dev-copy.html">dev</a><a href="` + base + `asyncio-eventloop.html">loop</a>`
	e := newEnv(t)
	e.load(pages)
	e.settle()
	p, err := e.ix.SearchPage(context.Background(), e.db, webindex.SearchRequest{Query: "asyncio event loop", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range p.Results {
		got = append(got, strings.TrimPrefix(r.URL, base))
	}
	want := []string{"asyncio-eventloop.html", "asyncio-dev-copy.html", "asyncio-dev.html", "index.html"}
	if p.Total != 4 || !slices.Equal(got, want) {
		t.Errorf("search = %d %v, want 4 %v", p.Total, got, want)
	}
	if len(p.Results) == 4 && !(p.Results[0].Score > p.Results[1].Score && p.Results[1].Score > p.Results[2].Score && p.Results[2].Score > p.Results[3].Score) {
		t.Errorf("scores do not decrease: %+v", p.Results)
	}
	c := &corpus{pages: pages}
	if _, wres := c.expected(t).Search("asyncio event loop", 10); !slices.EqualFunc(wres, p.Results, func(w batch.Result, g webindex.Result) bool { return w.URL == g.URL && w.Score == g.Score }) {
		t.Errorf("batch search = %+v, incremental %+v", wres, p.Results)
	}

	// By text alone (RankWeight negative: 0), the shorter of the two
	// developer pages comes first; the batch computation agrees again.
	textOnly, err := webindex.New(&webindex.Options{Scoring: webindex.Scoring{RankWeight: -1}})
	if err != nil {
		t.Fatal(err)
	}
	p, err = textOnly.SearchPage(context.Background(), e.db, webindex.SearchRequest{Query: "asyncio event loop", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, r := range p.Results {
		got = append(got, strings.TrimPrefix(r.URL, base))
	}
	if want := []string{"asyncio-eventloop.html", "asyncio-dev.html", "asyncio-dev-copy.html", "index.html"}; !slices.Equal(got, want) {
		t.Errorf("text-only search = %v, want %v", got, want)
	}
	s := batch.DefaultScoring()
	s.RankWeight = 0
	if _, wres := c.expected(t).WithScoring(s).Search("asyncio event loop", 10); !slices.EqualFunc(wres, p.Results, func(w batch.Result, g webindex.Result) bool { return w.URL == g.URL && w.Score == g.Score }) {
		t.Errorf("text-only batch search = %+v, incremental %+v", wres, p.Results)
	}
}
