package loader_test

import (
	"context"
	"errors"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/loader"
)

// A bulk run imports the last record of each URL into an empty index,
// reporting bad records as a normal run does, and leaves no notification:
// the index is complete when it returns. A second one is refused.
func TestBulkRun(t *testing.T) {
	e := newEnv(t)
	src := records(
		put("http://a.example/", html("A0")),
		put("http://a.example/", html("A")),
		put("http://b.example/", html("B")),
		put("http://gone.example/", html("Gone")),
		del("http://gone.example/"),
		put("ftp://bad.example/", html("Bad")),
	)
	s, ps := e.load(src, loader.Options{Bulk: true})
	if s.Read != 6 || s.Loaded != 2 || s.Bad != 1 || s.Superseded != 2 {
		t.Fatalf("bulk run: %+v", s)
	}
	if len(ps) != 1 || ps[0].Kind != loader.BadRecord {
		t.Errorf("problems %v", ps)
	}
	e.wantPages(map[string]string{"http://a.example/": "A", "http://b.example/": "B"})
	if n := e.pending(); n != 0 {
		t.Errorf("%d pending notifications after a bulk run, want 0", n)
	}
	_, _, err := e.tryLoad(context.Background(), records(put("http://c.example/", html("C"))), loader.Options{Bulk: true})
	if !errors.Is(err, webindex.ErrNotEmpty) {
		t.Fatalf("bulk run into a loaded index: %v", err)
	}
	if _, err := loader.New(e.db, loader.Options{BulkResume: true}); !errors.Is(err, loader.ErrInvalidOptions) {
		t.Fatalf("BulkResume without Bulk: %v", err)
	}
	s, _ = e.load(records(put("http://c.example/", html("C"))), loader.Options{})
	if s.Loaded != 1 {
		t.Fatalf("a normal run after the bulk one: %+v", s)
	}
}
