package webindex_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// TestHandlerLimitsConcurrentQueries holds every store read of the
// handler, sends limit+extra requests, and checks that exactly limit of
// them reach the store while the others are refused with 503, and that
// the held ones complete once reads are released.
func TestHandlerLimitsConcurrentQueries(t *testing.T) {
	const limit, extra = 3, 4
	e := newEnv(t)
	e.put(
		&extract.Page{URL: "http://a.example/", Title: "A", Text: "alpha"},
		&extract.Page{URL: "http://b.example/", Title: "B", Text: "beta", Links: []extract.Link{{Target: "http://a.example/"}}},
	)
	e.settle()
	cs := &countingStore{Store: e.st}
	db := e.reader(cs) // before holding reads: opening the DB reads the store
	cs.hold, cs.entered = make(chan struct{}), make(chan struct{}, limit+extra)
	release := sync.OnceFunc(func() { close(cs.hold) })
	t.Cleanup(release) // on failure too, before the store closes
	ix, err := webindex.New(&webindex.Options{MaxConcurrentQueries: limit, QueueWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := ix.Handler(db, quiet)

	type reply struct {
		rec  *httptest.ResponseRecorder
		path string
	}
	send := func(path string, replies chan<- reply) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		replies <- reply{rec, path}
	}
	paths := []string{"/api/top?n=5", "/api/search?q=alpha", "/api/page?url=http://a.example/"}

	held := make(chan reply, limit)
	for i := range limit {
		go send(paths[i%len(paths)], held)
	}
	for range limit {
		<-cs.entered // each held request is blocked in its first read
	}
	refused := make(chan reply, extra)
	for i := range extra {
		go send(paths[i%len(paths)], refused)
	}
	for range extra {
		var r reply
		select {
		case r = <-refused:
		case <-cs.entered:
			t.Fatalf("a request beyond the limit of %d reached the store", limit)
		}
		if r.rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("GET %s beyond the limit: status %d, want 503: %s", r.path, r.rec.Code, r.rec.Body)
		}
		if r.rec.Header().Get("Retry-After") == "" {
			t.Errorf("GET %s: 503 without Retry-After", r.path)
		}
		var body struct{ Error string }
		if err := json.Unmarshal(r.rec.Body.Bytes(), &body); err != nil || !strings.Contains(body.Error, "busy") {
			t.Errorf("GET %s: 503 body %q (%v), want a JSON error saying the server is busy", r.path, r.rec.Body, err)
		}
	}
	select {
	case <-cs.entered:
		t.Fatal("a request beyond the limit reached the store")
	default:
	}
	select {
	case r := <-held:
		t.Fatalf("GET %s finished while its reads were held: %d %s", r.path, r.rec.Code, r.rec.Body)
	default:
	}

	release()
	for range limit {
		if r := <-held; r.rec.Code != http.StatusOK {
			t.Errorf("held GET %s: status %d: %s", r.path, r.rec.Code, r.rec.Body)
		}
	}
	// Every slot is free again.
	for range limit + extra {
		if rec := serve(t, h, "/api/top?n=5", nil); rec.Code != http.StatusOK {
			t.Fatalf("after release: status %d: %s", rec.Code, rec.Body)
		}
	}
}

// TestHandlerQueueWaitEndsWithRequest checks that a request waiting for a
// slot gives up when its context ends, however long QueueWait is.
func TestHandlerQueueWaitEndsWithRequest(t *testing.T) {
	e := newEnv(t)
	e.put(&extract.Page{URL: "http://a.example/", Title: "A", Text: "alpha"})
	e.settle()
	cs := &countingStore{Store: e.st}
	db := e.reader(cs)
	cs.hold, cs.entered = make(chan struct{}), make(chan struct{}, 2)
	ix, err := webindex.New(&webindex.Options{MaxConcurrentQueries: 1, QueueWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := ix.Handler(db, quiet)
	done := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/top", nil))
		done <- rec.Code
	}()
	<-cs.entered

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/top", nil).WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), context.Canceled.Error()) {
		t.Errorf("request ended while waiting: %d %s, want 503 naming the cancellation", rec.Code, rec.Body)
	}
	close(cs.hold)
	if code := <-done; code != http.StatusOK {
		t.Errorf("held request: status %d", code)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []webindex.Options{
		{MaxResults: -1},
		{MaxConcurrentQueries: -2},
		{QueueWait: -time.Second},
		{Scoring: webindex.Scoring{K1: -1}},
		{Scoring: webindex.Scoring{BodyB: 1.5}},
		{Scoring: webindex.Scoring{AnchorB: 2}},
		{Scoring: webindex.Scoring{TitleWeight: math.Inf(1)}},
		{Scoring: webindex.Scoring{PriorWeight: math.NaN()}},
		{Scoring: webindex.Scoring{PriorCap: -1}},
	} {
		if _, err := webindex.New(&o); !errors.Is(err, webindex.ErrInvalidOptions) {
			t.Errorf("New(%+v) = %v, want ErrInvalidOptions", o, err)
		}
	}
	o := (&webindex.Options{}).EnsureDefaults()
	if o.MaxConcurrentQueries < 4 || o.QueueWait <= 0 || o.MaxResults != 1000 || o.Scoring != (webindex.Scoring{K1: 1.2, BodyWeight: 1, BodyB: 0.75, AnchorWeight: 2, AnchorB: 0.5, TitleWeight: 3, URLWeight: 2,
		TitleMatchBoost: 0.5, AnchorMatchBoost: 0.25, PhraseBoost: 0.5, ProximityBoost: 0.25, RerankDepth: 50, PriorWeight: 0.1, PriorCap: 1000}) {
		t.Errorf("defaults %+v", o)
	}
}
