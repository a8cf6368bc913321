package query_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/query"
)

// The API reads a page and a search as of a past snapshot: the page's
// title and the matches as they were, a deleted page still there; older
// than the history kept or than the store is 410, later than now or
// malformed 400.
func TestAPIAsOf(t *testing.T) {
	e := indextest.New(t)
	e.Load(map[string]string{
		"http://a.example/": `<title>Alpha</title>apple <a href="http://b.example/">bee</a>`,
		"http://b.example/": `<title>Beta</title>apple banana`,
	})
	e.Settle()
	then := e.Now()
	e.Load(map[string]string{"http://a.example/": `<title>Alpha again</title>cherry`, "http://b.example/": ""})
	e.Settle()
	srv := httptest.NewServer(e.Index.Handler(e.DB, indextest.Quiet))
	defer srv.Close()
	get := func(path string, into any) int {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode
	}
	asOf := fmt.Sprintf("&as_of=%d", then)
	var page struct {
		Title string
		AsOf  *query.Snapshot `json:"as_of"`
	}
	if s := get("/api/page?url="+url.QueryEscape("http://a.example/")+asOf, &page); s != 200 || page.Title != "Alpha" || page.AsOf == nil || page.AsOf.Timestamp != then {
		t.Fatalf("page as of then: %d %+v", s, page)
	}
	page.AsOf = nil
	if s := get("/api/page?url="+url.QueryEscape("http://a.example/"), &page); s != 200 || page.Title != "Alpha again" || page.AsOf != nil {
		t.Fatalf("page now: %d %+v", s, page)
	}
	var body map[string]any
	if s := get("/api/page?url="+url.QueryEscape("http://b.example/")+asOf, &body); s != 200 {
		t.Fatalf("a page deleted since, as of then: %d %v", s, body)
	}
	if s := get("/api/page?url="+url.QueryEscape("http://b.example/"), &body); s != 404 {
		t.Fatalf("a deleted page now: %d %v", s, body)
	}
	var search struct{ Total int }
	if s := get("/api/search?q=apple"+asOf, &search); s != 200 || search.Total != 2 {
		t.Fatalf("search as of then: %d %+v", s, search)
	}
	if s := get("/api/search?q=apple", &search); s != 200 || search.Total != 0 {
		t.Fatalf("search now: %d %+v", s, search)
	}
	// Before the store existed is a time it cannot show, 410 as after a
	// collection, though none has run yet.
	if s := get("/api/search?q=apple&as_of=-1h", &body); s != 410 || !strings.Contains(fmt.Sprint(body["error"]), "before the store was first opened") {
		t.Fatalf("search an hour ago, before the store was first opened: %d %v, want 410", s, body)
	}
	for _, bad := range []string{"yesterday", "0", fmt.Sprint(then + 1<<40), "-1x"} {
		if s := get("/api/search?q=apple&as_of="+url.QueryEscape(bad), &body); s != 400 || body["error"] == "" {
			t.Errorf("as_of=%s: %d %v, want 400 with an error", bad, s, body)
		}
	}
	if _, err := admin.GC(context.Background(), e.DB, 0); err != nil {
		t.Fatal(err)
	}
	if s := get("/api/page?url="+url.QueryEscape("http://a.example/")+asOf, &body); s != 410 || body["error"] == "" {
		t.Fatalf("as of a snapshot collected since: %d %v, want 410", s, body)
	}
}

// ParseAsOf reads a time, a negative duration or a timestamp.
func TestParseAsOf(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	for in, want := range map[string]uint64{
		"":                     0,
		"12345":                12345,
		"2026-11-27T09:00:00Z": framework.TimestampAt(now.Add(-time.Hour)),
		"-1h":                  framework.TimestampAt(now.Add(-time.Hour)),
		" -90s ":               framework.TimestampAt(now.Add(-90 * time.Second)),
	} {
		if got, err := query.ParseAsOf(in, now); err != nil || got != want {
			t.Errorf("ParseAsOf(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "soon", "-", "2026-11-27"} {
		if _, err := query.ParseAsOf(in, now); !errors.Is(err, query.ErrBadAsOf) {
			t.Errorf("ParseAsOf(%q): %v, want ErrBadAsOf", in, err)
		}
	}
	if framework.TimeOf(framework.TimestampAt(now)).After(now) {
		t.Error("TimestampAt(t) is after t")
	}
}
