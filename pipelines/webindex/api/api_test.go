package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
)

func TestAPI(t *testing.T) {
	e := indextest.New(t)
	e.Load(map[string]string{
		"http://a.example/": `<title>Alpha</title>apple <a href="http://b.example/">bee</a>`,
		"http://b.example/": `<title>Beta</title>apple banana`,
	})
	e.Settle()
	srv := httptest.NewServer(e.Index.Handler(e.DB, indextest.Quiet))
	defer srv.Close()

	get := func(path string, wantStatus int, into any) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != wantStatus {
			t.Fatalf("GET %s: status %d, want %d", path, resp.StatusCode, wantStatus)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("GET %s: content type %q", path, ct)
		}
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}

	var page map[string]any
	get("/api/page?url="+url.QueryEscape("http://B.example"), 200, &page)
	if page["url"] != "http://b.example/" || page["canonical"] != "http://b.example/" || page["inbound_count"] != 1.0 || page["rank"] != 1.0 {
		t.Fatalf("page: %v", page)
	}
	in := page["inlinks"].([]any)[0].(map[string]any)
	if in["source"] != "http://a.example/" || in["target"] != "http://b.example/" || in["anchor"] != "bee" {
		t.Fatalf("inlinks: %v", page["inlinks"])
	}
	for _, key := range []string{"title", "duplicates", "outlinks"} {
		if _, ok := page[key]; !ok {
			t.Errorf("page view lacks %q", key)
		}
	}

	var search struct {
		Total   int
		Results []struct {
			URL          string
			Title        string
			InboundCount int `json:"inbound_count"`
		}
	}
	get("/api/search?q=APPLE&limit=1", 200, &search)
	if search.Total != 2 || len(search.Results) != 1 || search.Results[0].URL != "http://b.example/" || search.Results[0].Title != "Beta" || search.Results[0].InboundCount != 1 {
		t.Fatalf("search: %+v", search)
	}
	get("/api/top?n=5", 200, &search)
	if len(search.Results) != 2 || search.Results[1].URL != "http://a.example/" {
		t.Fatalf("top: %+v", search)
	}

	for path, status := range map[string]int{
		"/api/page?url=" + url.QueryEscape("http://nowhere.example/"): 404,
		"/api/page":                      400,
		"/api/page?url=ftp://x.example/": 400,
		"/api/search?q=apple&limit=-1":   400,
		"/api/top?n=many":                400,
		"/api/nothing":                   404,
	} {
		var body struct{ Error string }
		get(path, status, &body)
		if body.Error == "" {
			t.Errorf("GET %s: no error message", path)
		}
		if status == 404 && strings.HasPrefix(path, "/api/page") && !strings.Contains(body.Error, "nowhere.example") {
			t.Errorf("GET %s: error %q does not name the URL", path, body.Error)
		}
	}
}

// Contract: /api/page finds a page by any spelling extract.Normalize maps to
// its key, and links spelled differently from the page's own URL count.
func TestAPIPageURLSpellings(t *testing.T) {
	e := indextest.New(t)
	e.Load(map[string]string{
		"http://docs.example/cpp/index.html": `<title>Index</title>` +
			`<a href="operator%3D.html">assign</a><a href="operator%28%29.html">call</a><a href="%C3%A9t%C3%A9.html">summer</a>` +
			`<a href="a%2Fb.html">escaped slash</a>`,
		"http://docs.example/cpp/operator=.html":  `<title>Assign</title>assignment`,
		"http://docs.example/cpp/operator().html": `<title>Call</title>call`,
		"http://docs.example/cpp/été.html":        `<title>Summer</title>summer`,
		"http://docs.example/cpp/a%2Fb.html":      `<title>Slash</title>slash`,
	})
	e.Settle()
	srv := httptest.NewServer(e.Index.Handler(e.DB, indextest.Quiet))
	defer srv.Close()

	get := func(rawQuery string, into any) int {
		t.Helper()
		resp, err := http.Get(srv.URL + "/api/page?" + rawQuery)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatalf("GET %s: %v", rawQuery, err)
		}
		return resp.StatusCode
	}
	for _, tc := range []struct {
		want, title string
		spellings   []string
	}{
		{"http://docs.example/cpp/operator=.html", "Assign", []string{
			"http://docs.example/cpp/operator=.html", "http://docs.example/cpp/operator%3D.html",
			"http://docs.example/cpp/operator%3d.html", "HTTP://Docs.Example:80/cpp/./operator%3D.html#x",
		}},
		{"http://docs.example/cpp/operator().html", "Call", []string{
			"http://docs.example/cpp/operator%28%29.html", "http://docs.example/cpp/operator().html",
		}},
		{"http://docs.example/cpp/%C3%A9t%C3%A9.html", "Summer", []string{
			"http://docs.example/cpp/été.html", "http://docs.example/cpp/%c3%a9t%C3%A9.html",
		}},
		{"http://docs.example/cpp/a%2Fb.html", "Slash", []string{
			"http://docs.example/cpp/a%2Fb.html", "http://docs.example/cpp/a%2fb.html",
		}},
	} {
		for _, s := range tc.spellings {
			var page struct {
				URL          string
				Title        string
				InboundCount int `json:"inbound_count"`
			}
			if status := get("url="+url.QueryEscape(s), &page); status != http.StatusOK {
				t.Fatalf("url=%q: status %d", s, status)
			}
			if page.URL != tc.want || page.Title != tc.title || page.InboundCount != 1 {
				t.Errorf("url=%q: %+v, want %s %q with the index page's link", s, page, tc.want, tc.title)
			}
		}
	}

	// The parameter is decoded once, as any query parameter: an unescaped
	// %3D arrives as "=", the same page, but an unescaped %2F arrives as
	// "/", another page.
	var page struct{ URL string }
	if status := get("url=http://docs.example/cpp/operator%3D.html", &page); status != http.StatusOK || page.URL != "http://docs.example/cpp/operator=.html" {
		t.Errorf("unescaped parameter: status %d, %+v", status, page)
	}
	var fail struct{ Error string }
	if status := get("url=http://docs.example/cpp/a%2Fb.html", &fail); status != http.StatusNotFound || !strings.Contains(fail.Error, "http://docs.example/cpp/a/b.html") {
		t.Errorf("unescaped %%2F: status %d, error %q", status, fail.Error)
	}
	fail.Error = ""
	if status := get("url="+url.QueryEscape("http://docs.example/cpp/100%.html"), &fail); status != http.StatusBadRequest || !strings.Contains(fail.Error, "100%.html") {
		t.Errorf("stray %%: status %d, error %q", status, fail.Error)
	}
}
