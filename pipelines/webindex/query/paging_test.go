package query_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/query"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// pagingCorpus: a hub linked from 45 pages (one anchor each), a twin of
// the hub's own copy (a cluster of two) linked from 13 of them, and a page
// with 25 outlinks. Every page says "common".
func pagingCorpus() map[string]string {
	pages := map[string]string{}
	var links strings.Builder
	for i := range 45 {
		u := fmt.Sprintf("http://src%d.example/p", i)
		h := fmt.Sprintf(`<title>Source %d</title><p>common source words %d</p><a href="http://hub.example/">anchor %d</a>`, i, i, i)
		if i%4 == 0 {
			h += `<a href="http://twin.example/b">twin</a>`
		}
		if i%7 == 0 {
			h += `<a href="http://twin.example/a">twin</a>`
		}
		pages[u] = h
		if i < 25 {
			fmt.Fprintf(&links, `<a href="%s">to %d</a>`, u, i)
		}
	}
	pages["http://hub.example/"] = `<title>Hub</title><p>common hub</p>`
	pages["http://twin.example/a"] = `<title>Twin</title><p>common twin text</p>`
	pages["http://twin.example/b"] = `<title>Twin</title><p>common twin text</p>`
	pages["http://many.example/"] = `<title>Many</title><p>common</p>` + links.String()
	return pages
}

// TestPaging pages through search results, the top list, a site, inlinks
// (of a lone page and of a cluster of two) and outlinks in steps of 7, and
// checks that the pages put together are the whole list.
func TestPaging(t *testing.T) {
	e := indextest.New(t)
	e.Load(pagingCorpus())
	e.Settle()
	ctx := context.Background()

	collect := func(name string, whole []string, page func(offset int) (int, []string, error)) {
		t.Helper()
		var got []string
		for offset := 0; ; offset += 7 {
			total, items, err := page(offset)
			if err != nil {
				t.Fatalf("%s from %d: %v", name, offset, err)
			}
			if total != len(whole) {
				t.Fatalf("%s from %d: total %d, want %d", name, offset, total, len(whole))
			}
			if len(items) > 7 || (offset < total && len(items) != min(7, total-offset)) {
				t.Fatalf("%s from %d: %d items", name, offset, len(items))
			}
			got = append(got, items...)
			if offset >= total {
				break
			}
		}
		if !slices.Equal(got, whole) {
			t.Errorf("%s pages = %v, want %v", name, got, whole)
		}
	}

	full, err := e.Index.SearchPage(ctx, e.DB, query.SearchRequest{Query: "common", Limit: 1000})
	if err != nil || full.Total != 48 || len(full.Results) != 48 {
		t.Fatalf("search common: %d results of %d, %v", len(full.Results), full.Total, err)
	}
	collect("search", resultURLs(full.Results), func(offset int) (int, []string, error) {
		p, err := e.Index.SearchPage(ctx, e.DB, query.SearchRequest{Query: "common", Offset: offset, Limit: 7})
		return p.Total, resultURLs(p.Results), err
	})
	top, err := e.Index.Top(ctx, e.DB, 1000)
	if err != nil {
		t.Fatal(err)
	}
	collect("top", resultURLs(top), func(offset int) (int, []string, error) {
		p, err := e.Index.TopPage(ctx, e.DB, offset, 7)
		return p.Total, resultURLs(p.Results), err
	})
	for _, site := range []string{"twin.example", "HTTP://Hub.Example/whatever"} {
		var whole []string
		for _, r := range top {
			if strings.Contains(r.URL, "://"+strings.ToLower(strings.TrimPrefix(strings.Split(site, "/whatever")[0], "HTTP://"))+"/") {
				whole = append(whole, r.URL)
			}
		}
		if len(whole) != 1 {
			t.Fatalf("site %s: %v in the top list", site, whole)
		}
		collect("site "+site, whole, func(offset int) (int, []string, error) {
			p, err := e.Index.SitePage(ctx, e.DB, site, offset, 7)
			return p.Total, resultURLs(p.Results), err
		})
	}
	for _, u := range []string{"http://hub.example/", "http://twin.example/b"} {
		pv, err := e.Index.Page(ctx, e.DB, u)
		if err != nil {
			t.Fatal(err)
		}
		var whole []string
		for _, l := range pv.Inlinks {
			whole = append(whole, fmt.Sprint(l))
		}
		if want := map[string]int{"http://hub.example/": 45, "http://twin.example/b": 19}[u]; len(whole) != want {
			t.Fatalf("%s has %d inlinks, want %d", u, len(whole), want)
		}
		collect("inlinks of "+u, whole, func(offset int) (int, []string, error) {
			p, err := e.Index.Inlinks(ctx, e.DB, u, offset, 7)
			var items []string
			for _, l := range p.Links {
				items = append(items, fmt.Sprint(l))
			}
			return p.Total, items, err
		})
	}
	pv, err := e.Index.Page(ctx, e.DB, "http://many.example/")
	if err != nil || len(pv.Outlinks) != 25 {
		t.Fatalf("outlinks of many: %d %v", len(pv.Outlinks), err)
	}
	var whole []string
	for _, l := range pv.Outlinks {
		whole = append(whole, fmt.Sprint(l))
	}
	collect("outlinks", whole, func(offset int) (int, []string, error) {
		p, err := e.Index.Outlinks(ctx, e.DB, "http://many.example/", offset, 7)
		var items []string
		for _, l := range p.Links {
			items = append(items, fmt.Sprint(l))
		}
		return p.Total, items, err
	})

	// Bad requests.
	if _, err := e.Index.SearchPage(ctx, e.DB, query.SearchRequest{Query: "common", Offset: query.MaxSearchDepth, Limit: 1}); !errors.Is(err, query.ErrBadQuery) {
		t.Errorf("search beyond the depth: %v", err)
	}
	if _, err := e.Index.SitePage(ctx, e.DB, "a b/c", 0, 7); !errors.Is(err, query.ErrBadSite) {
		t.Errorf("site with a bad name: %v", err)
	}
	for _, f := range []func() error{
		func() error { _, err := e.Index.Inlinks(ctx, e.DB, "http://nowhere.example/", 0, 7); return err },
		func() error { _, err := e.Index.Outlinks(ctx, e.DB, "http://nowhere.example/", 0, 7); return err },
	} {
		if err := f(); !errors.Is(err, query.ErrPageNotFound) || !strings.Contains(err.Error(), "nowhere.example") {
			t.Errorf("links of a page not loaded: %v", err)
		}
	}
}

func resultURLs(rs []query.Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.URL)
	}
	return out
}

// TestAPIPagingAndSnippets drives the new endpoints through the handler.
func TestAPIPagingAndSnippets(t *testing.T) {
	e := indextest.New(t)
	e.Load(pagingCorpus())
	e.Load(map[string]string{"http://snip.example/": `<title>Snip</title><p>` + strings.Repeat("filler ", 100) + `the <b>Common</b> ground &lt;script&gt; of HUB pages` + strings.Repeat(" filler", 100) + `</p>`})
	e.Settle()
	srv := httptest.NewServer(e.Index.Handler(e.DB, indextest.Quiet))
	defer srv.Close()
	get := func(path string, wantStatus int, into any) {
		t.Helper()
		if p, ok := into.(*searchReply); ok {
			*p = searchReply{}
		}
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != wantStatus {
			t.Fatalf("GET %s: status %d, want %d", path, resp.StatusCode, wantStatus)
		}
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var search searchReply
	get("/api/search?q="+url.QueryEscape("hub common")+"&limit=5&snippets=1", 200, &search)
	if search.Total != 2 || len(search.Results) != 2 {
		t.Fatalf("search: %+v", search)
	}
	for _, r := range search.Results {
		s := r.Snippet
		if s == nil || len(s.Highlights) < 2 {
			t.Fatalf("%s: snippet %+v", r.URL, s)
		}
		for _, h := range s.Highlights {
			if w := strings.ToLower(s.Text[h[0]:h[1]]); w != "hub" && w != "common" {
				t.Errorf("%s: highlight %v is %q in %q", r.URL, h, w, s.Text)
			}
		}
		if r.URL == "http://snip.example/" && (!strings.HasPrefix(s.Text, "… ") || !strings.HasSuffix(s.Text, " …") || !strings.Contains(s.Text, "<script>") || len(s.Text) > query.SnippetBytes+10) {
			t.Errorf("snippet of the long page: %q", s.Text)
		}
	}
	get("/api/search?q=common&offset=3&limit=2", 200, &search)
	if search.Total != 49 || search.Offset != 3 || len(search.Results) != 2 || search.Results[0].Snippet != nil {
		t.Errorf("search from 3 without snippets: %+v", search)
	}
	var links struct {
		Total, Offset int
		Links         []schema.Inlink
	}
	get("/api/inlinks?url="+url.QueryEscape("http://hub.example/")+"&offset=40&limit=10", 200, &links)
	if links.Total != 45 || links.Offset != 40 || len(links.Links) != 5 {
		t.Errorf("inlinks from 40: %+v", links)
	}
	var page struct {
		Inlinks       []schema.Inlink
		InlinksTotal  int `json:"inlinks_total"`
		OutlinksTotal int `json:"outlinks_total"`
	}
	get("/api/page?url="+url.QueryEscape("http://hub.example/")+"&links=3", 200, &page)
	if len(page.Inlinks) != 3 || page.InlinksTotal != 45 || page.OutlinksTotal != 0 {
		t.Errorf("page with 3 links: %+v", page)
	}
	var out struct {
		Total int
		Links []query.Outlink
	}
	get("/api/outlinks?url="+url.QueryEscape("http://many.example/")+"&limit=100", 200, &out)
	if out.Total != 25 || len(out.Links) != 25 {
		t.Errorf("outlinks: %+v", out)
	}
	get("/api/site?host=twin.example", 200, &search)
	if search.Total != 1 || len(search.Results) != 1 || !strings.HasPrefix(search.Results[0].URL, "http://twin.example/") {
		t.Errorf("site: %+v", search)
	}
	get("/api/top?offset=1&limit=1", 200, &search)
	if search.Total != 49 || len(search.Results) != 1 { // the twins are one cluster
		t.Errorf("top from 1: %+v", search)
	}
	var o query.Overview
	get("/api/overview", 200, &o)
	if o.Pages != 50 || o.Clusters != 49 || o.TextClusters != 49 || o.Links != 45+12+7+25 || o.LastChange.IsZero() {
		t.Errorf("overview: %+v", o)
	}
	for path, status := range map[string]int{
		"/api/search?q=common&offset=-1":            400,
		"/api/search?q=common&offset=10000&limit=1": 400,
		"/api/inlinks": 400,
		"/api/inlinks?url=" + url.QueryEscape("http://no.example"): 404,
		"/api/outlinks?url=ftp://x.example/":                       400,
		"/api/site?host=":                                          400,
		"/api/top?offset=x":                                        400,
	} {
		var body struct{ Error string }
		get(path, status, &body)
		if body.Error == "" {
			t.Errorf("GET %s: no error message", path)
		}
	}
}

type searchReply struct {
	Total, Offset int
	Results       []struct {
		URL     string
		Snippet *struct {
			Text       string
			Highlights [][2]int
		}
	}
}
