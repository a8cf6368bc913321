package ui_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/ui"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// indexed starts an index, loads the test corpus and waits until it is
// indexed: a hub linked from 30 pages about event loops (one of them with
// markup in its title), and a page with 25 outlinks.
func indexed(t *testing.T) http.Handler {
	t.Helper()
	pages := map[string]string{
		"http://hub.example/": `<title>Hub</title><p>the hub</p>`,
	}
	var many strings.Builder
	for i := range 30 {
		u := fmt.Sprintf("http://docs.example/p%02d", i)
		title := fmt.Sprintf("Event loop %d", i)
		if i == 7 {
			title = `<script>alert("x")</script> loop & co`
		}
		pages[u] = fmt.Sprintf(`<title>%s</title><p>The event loop runs tasks, page %d.</p><a href="http://hub.example/">hub %d</a>`, strings.NewReplacer("<", "&lt;", ">", "&gt;", "&", "&amp;").Replace(title), i, i)
		if i < 25 {
			fmt.Fprintf(&many, `<a href="%s">to %d</a>`, u, i)
		}
	}
	pages["http://many.example/"] = `<title>Many</title><p>links</p>` + many.String()
	pages["http://cafe.example/"] = `<title>Café</title><p>Ünïcödé first: the naïve café</p>`
	return indexedPages(t, pages)
}

// indexedPages starts an index, loads pages (URL to HTML) and waits until
// they are indexed.
func indexedPages(t *testing.T, pages map[string]string, opts ...ui.ServerOption) http.Handler {
	t.Helper()
	ix, err := webindex.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := framework.NewRegistry()
	if err := ix.Register(reg); err != nil {
		t.Fatal(err)
	}
	fw, err := frameworktest.Start(context.Background(), reg, &frameworktest.Options{Workers: 8, IdleWait: 2 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fw.Close() })
	ctx := context.Background()
	for u, h := range pages {
		p, err := extract.Parse(u, strings.NewReader(h), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if err := fw.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			_, err := webindex.PutPage(ctx, tx, p)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := fw.WaitForObservers(wctx); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", ix.Handler(fw.DB(), quiet))
	mux.Handle("/", ui.Server(ix, fw.DB(), quiet, opts...))
	return mux
}

func fetch(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusMethodNotAllowed && !strings.HasPrefix(path, "/api/") && !strings.HasSuffix(path, ".css") && ct != "text/html; charset=utf-8" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return rec.Code, rec.Body.String()
}

func TestServerPages(t *testing.T) {
	h := indexed(t)
	for _, tt := range []struct {
		path   string
		status int
		want   []string
		not    []string
	}{
		{"/", 200, []string{`<dd id="pages">33</dd>`, `<dd id="links">55</dd>`, `<dd id="clusters">33 (33 with text)</dd>`, `href="page?url=http%3a%2f%2fhub.example%2f"`, "1–20 of 33", `rel="next" href="./?offset=20"`}, []string{`rel="prev"`, "never"}},
		{"/?offset=20", 200, []string{"21–33 of 33", `rel="prev" href="./"`}, []string{`rel="next"`}},
		{"/search?q=event+LOOP", 200, []string{"30 matching pages", "<mark>event</mark> <mark>loop</mark>", "1–20 of 30", `rel="next" href="search?offset=20&amp;q=event&#43;LOOP"`, `value="event LOOP"`}, []string{"<script>alert"}},
		{"/search?q=loop+co", 200, []string{"&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; loop &amp; co", "1 matching page<"}, []string{"<script>alert"}},
		{"/search?q=event&offset=20", 200, []string{"21–30 of 30", `rel="prev" href="search?q=event"`}, nil},
		{"/search?q=nothing", 200, []string{"0 matching pages", "No pages."}, []string{`muted">none<`}},
		{"/page?url=" + url.QueryEscape("http://hub.example/"), 200, []string{"<h1>Hub</h1>", "Inlinks (30)", `href="inlinks?url=http%3a%2f%2fhub.example%2f"`, "All 30 inlinks", `href="site?host=hub.example"`, "30 <span class=\"muted\">(distinct pages linking here)"}, []string{"<th>Target</th>", "One row per link"}},
		{"/inlinks?url=" + url.QueryEscape("http://hub.example/") + "&offset=20", 200, []string{"21–30 of 30", "hub 29"}, []string{"hub 19<"}},
		{"/outlinks?url=" + url.QueryEscape("http://many.example/"), 200, []string{"1–20 of 25", "to 0", `rel="next"`}, []string{"to 20<"}},
		{"/site?host=docs.example", 200, []string{"Pages of docs.example", "1–20 of 30"}, []string{"hub.example/"}},
		{"/page?url=" + url.QueryEscape("http://nowhere.example/"), 404, []string{"nowhere.example"}, nil},
		{"/page", 400, []string{"missing url parameter"}, nil},
		{"/search?q=x&offset=-2", 400, []string{"offset"}, nil},
		{"/site?host=a+b", 400, []string{"not a host name"}, nil},
		{"/nope", 404, []string{"no page /nope"}, nil},
	} {
		status, body := fetch(t, h, "GET", tt.path)
		if status != tt.status {
			t.Errorf("GET %s = %d, want %d: %s", tt.path, status, tt.status, body)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(body, w) {
				t.Errorf("GET %s lacks %q", tt.path, w)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(body, w) {
				t.Errorf("GET %s has %q", tt.path, w)
			}
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'none'") {
		t.Errorf("pages allow scripts: Content-Security-Policy %q", csp)
	}
	if status, _ := fetch(t, h, "POST", "/search?q=x"); status != http.StatusMethodNotAllowed {
		t.Errorf("POST /search = %d", status)
	}
	if status, body := fetch(t, h, "GET", "/style.css"); status != 200 || !strings.Contains(body, "mark") {
		t.Errorf("GET /style.css = %d", status)
	} else if !strings.Contains(body, "th { font-weight: 600; overflow-wrap: normal; }") {
		// Cells break long URLs anywhere; a header ("Tombstones") must
		// break only between words.
		t.Errorf("GET /style.css: table headers may break inside a word")
	}
	if status, body := fetch(t, h, "GET", "/api/overview"); status != 200 || !strings.Contains(body, `"pages":33`) {
		t.Errorf("GET /api/overview = %d %s", status, body)
	}
}

// TestAPageWithDuplicatesShowsWhereEachInlinkGoes: the inlinks of a
// cluster with duplicates go to several pages, so their table names each
// link's target, and the page says how its inbound count (distinct
// sources) differs from its rows (one per link); a page without
// duplicates shows neither.
func TestAPageWithDuplicatesShowsWhereEachInlinkGoes(t *testing.T) {
	text := `<title>Copy</title><p>the same words on two mirrors</p>`
	h := indexedPages(t, map[string]string{
		"http://a.example/doc":  text,
		"http://b.example/doc":  text,
		"http://src.example/":   `<title>Source</title><p>links</p><a href="http://a.example/doc">first</a><a href="http://b.example/doc">second</a>`,
		"http://alone.example/": `<title>Alone</title><p>alone</p>`,
		"http://other.example/": `<title>Other</title><p>other</p><a href="http://alone.example/">to alone</a>`,
	})
	_, body := fetch(t, h, "GET", "/page?url="+url.QueryEscape("http://a.example/doc"))
	for _, w := range []string{"Inlinks (2)", "<th>Target</th>", "<td>http://b.example/doc</td>", "1 <span class=\"muted\">(distinct pages linking to this page or its duplicates)", "One row per link"} {
		if !strings.Contains(body, w) {
			t.Errorf("the page of a duplicate lacks %q", w)
		}
	}
	_, body = fetch(t, h, "GET", "/inlinks?url="+url.QueryEscape("http://a.example/doc"))
	if !strings.Contains(body, "<th>Target</th>") {
		t.Errorf("the inlinks of a cluster with duplicates do not say which each goes to")
	}
	_, body = fetch(t, h, "GET", "/page?url="+url.QueryEscape("http://alone.example/"))
	for _, w := range []string{"<th>Target</th>", "One row per link"} {
		if strings.Contains(body, w) {
			t.Errorf("the page of a page without duplicates has %q", w)
		}
	}
}
