package webindex_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestAPI(t *testing.T) {
	e := newEnv(t)
	e.load(map[string]string{
		"http://a.example/": `<title>Alpha</title>apple <a href="http://b.example/">bee</a>`,
		"http://b.example/": `<title>Beta</title>apple banana`,
	})
	e.settle()
	srv := httptest.NewServer(e.ix.Handler(e.db, quiet))
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
