package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestIndex(t *testing.T) {
	res := get(t, Handler(), "GET", "/")
	if res.StatusCode != 200 {
		t.Fatalf("GET / = %d", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control = %q", cc)
	}
	b := body(t, res)
	for _, want := range []string{
		`<form id="search-form"`, `type="search"`, `<script src="app.js"`, `href="style.css"`,
	} {
		if !strings.Contains(b, want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
}

func TestAssets(t *testing.T) {
	h := Handler()
	for path, ct := range map[string]string{
		"/app.js":    "text/javascript; charset=utf-8",
		"/style.css": "text/css; charset=utf-8",
	} {
		res := get(t, h, "GET", path)
		if res.StatusCode != 200 {
			t.Errorf("GET %s = %d", path, res.StatusCode)
			continue
		}
		if got := res.Header.Get("Content-Type"); got != ct {
			t.Errorf("GET %s Content-Type = %q, want %q", path, got, ct)
		}
		if body(t, res) == "" {
			t.Errorf("GET %s: empty body", path)
		}
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	h := Handler()
	for _, path := range []string{"/index.html", "/static/app.js", "/foo", "/app.js/", "/api/search", "/search"} {
		if res := get(t, h, "GET", path); res.StatusCode != 404 {
			t.Errorf("GET %s = %d, want 404", path, res.StatusCode)
		}
	}
	if res := get(t, h, "POST", "/"); res.StatusCode != 405 {
		t.Errorf("POST / = %d, want 405", res.StatusCode)
	}
	res := get(t, h, "HEAD", "/app.js")
	if res.StatusCode != 200 || body(t, res) != "" {
		t.Errorf("HEAD /app.js = %d", res.StatusCode)
	}
}

func TestConditionalGet(t *testing.T) {
	h := Handler()
	etag := get(t, h, "GET", "/").Header.Get("ETag")
	if etag == "" {
		t.Fatal("no ETag on /")
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("If-None-Match", etag)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("conditional GET / = %d, want 304", rec.Code)
	}
}

// TestAPIEndpoints checks that the script talks only to the JSON API
// endpoints the UI is documented to depend on.
func TestAPIEndpoints(t *testing.T) {
	js, err := static.ReadFile("static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range regexp.MustCompile(`/api/[A-Za-z0-9_./-]*`).FindAllString(string(js), -1) {
		if !slices.Contains(got, m) {
			got = append(got, m)
		}
	}
	slices.Sort(got)
	want := []string{"/api/inlinks", "/api/outlinks", "/api/overview", "/api/page", "/api/search", "/api/site", "/api/top"}
	if !slices.Equal(got, want) {
		t.Errorf("app.js refers to %v, want exactly %v", got, want)
	}
}

// TestMounted serves the UI next to a stub API on one mux, as the runner
// does, and checks that each request reaches the right handler.
func TestMounted(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"results":[]}`)
	})
	mux.Handle("/", Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for path, want := range map[string]string{
		"/":             "text/html; charset=utf-8",
		"/app.js":       "text/javascript; charset=utf-8",
		"/style.css":    "text/css; charset=utf-8",
		"/api/top?n=20": "application/json",
	} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != want {
			t.Errorf("GET %s = %d %q, want 200 %q", path, res.StatusCode, res.Header.Get("Content-Type"), want)
		}
	}
	res, err := http.Get(srv.URL + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("GET /nope = %d, want 404", res.StatusCode)
	}
}
