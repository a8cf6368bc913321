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
