package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
)

// TestHandlerLimitsConcurrentQueries holds every store read of the
// handler and sends limit + queued + extra requests: exactly limit of them
// reach the store, queued wait their turn without reaching it, and the
// extra ones find the queue full and are refused with 503 at once. Once
// reads are released, the held and the queued requests all complete.
func TestHandlerLimitsConcurrentQueries(t *testing.T) {
	const limit, queued, extra = 3, 4, 2
	e := indextest.New(t)
	e.Put(
		&extract.Page{URL: "http://a.example/", Title: "A", Text: "alpha"},
		&extract.Page{URL: "http://b.example/", Title: "B", Text: "beta", Links: []extract.Link{{Target: "http://a.example/"}}},
	)
	e.Settle()
	cs := &indextest.CountingStore{Store: e.Store}
	db := e.Reader(cs) // before holding reads: opening the DB reads the store
	cs.Hold, cs.Entered = make(chan struct{}), make(chan struct{}, limit+queued+extra)
	release := sync.OnceFunc(func() { close(cs.Hold) })
	t.Cleanup(release) // on failure too, before the store closes
	ix, err := webindex.New(&webindex.Options{MaxConcurrentQueries: limit, MaxQueuedQueries: queued, QueueWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := ix.Handler(db, indextest.Quiet)

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

	served := make(chan reply, limit+queued)
	for i := range limit {
		go send(paths[i%len(paths)], served)
	}
	for range limit {
		<-cs.Entered // each held request is blocked in its first read
	}
	for i := range queued {
		go send(paths[i%len(paths)], served)
	}
	// The queued requests wait without reaching the store; there is no
	// way to see them wait but to give them time to get it wrong.
	time.Sleep(20 * time.Millisecond)
	refused := make(chan reply, extra)
	for i := range extra {
		go send(paths[i%len(paths)], refused)
	}
	for range extra {
		var r reply
		select {
		case r = <-refused:
		case r = <-served:
			t.Fatalf("GET %s answered while every slot was held: %d %s", r.path, r.rec.Code, r.rec.Body)
		case <-cs.Entered:
			t.Fatalf("a request beyond the limit of %d reached the store", limit)
		}
		if r.rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("GET %s beyond the queue: status %d, want 503: %s", r.path, r.rec.Code, r.rec.Body)
		}
		if r.rec.Header().Get("Retry-After") == "" {
			t.Errorf("GET %s: 503 without Retry-After", r.path)
		}
		var body struct{ Error string }
		if err := json.Unmarshal(r.rec.Body.Bytes(), &body); err != nil || !strings.Contains(body.Error, "overloaded") {
			t.Errorf("GET %s: 503 body %q (%v), want a JSON error saying the server is overloaded", r.path, r.rec.Body, err)
		}
	}
	select {
	case <-cs.Entered:
		t.Fatal("a request beyond the limit reached the store")
	case r := <-served:
		t.Fatalf("GET %s finished while its reads were held: %d %s", r.path, r.rec.Code, r.rec.Body)
	default:
	}

	release()
	for range limit + queued {
		if r := <-served; r.rec.Code != http.StatusOK {
			t.Errorf("held or queued GET %s: status %d: %s", r.path, r.rec.Code, r.rec.Body)
		}
	}
	// Every slot is free again.
	for range limit + queued + extra {
		if rec := indextest.Serve(t, h, "/api/top?n=5", nil); rec.Code != http.StatusOK {
			t.Fatalf("after release: status %d: %s", rec.Code, rec.Body)
		}
	}
}

// TestHandlerServesABurst sends 16 searches at once to a handler with the
// default options (4 slots on 2 cores): every one is answered 200, none is
// shed, however slow the store is.
func TestHandlerServesABurst(t *testing.T) {
	e := indextest.New(t)
	pages := make(map[string]string)
	for i := range 40 {
		pages[fmt.Sprintf("http://burst.example/%d", i)] = fmt.Sprintf("<title>Page %d</title><p>burst common words %d</p>", i, i)
	}
	e.Load(pages)
	e.Settle()
	cs := &indextest.CountingStore{Store: e.Store, Delay: 20 * time.Millisecond}
	h := e.Index.Handler(e.Reader(cs), indextest.Quiet)
	const burst = 16
	codes := make(chan int, burst)
	var start sync.WaitGroup
	start.Add(1)
	for i := range burst {
		go func() {
			start.Wait()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", fmt.Sprintf("/api/search?q=burst+%d&snippets=1", i), nil))
			codes <- rec.Code
		}()
	}
	start.Done()
	for range burst {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a request of the burst: status %d, want 200", code)
		}
	}
}

// TestHandlerQueueWaitTimesOut checks that a queued request is refused
// once it has waited QueueWait for a slot.
func TestHandlerQueueWaitTimesOut(t *testing.T) {
	e := indextest.New(t)
	e.Put(&extract.Page{URL: "http://a.example/", Title: "A", Text: "alpha"})
	e.Settle()
	cs := &indextest.CountingStore{Store: e.Store}
	db := e.Reader(cs)
	cs.Hold, cs.Entered = make(chan struct{}), make(chan struct{}, 2)
	release := sync.OnceFunc(func() { close(cs.Hold) })
	t.Cleanup(release)
	ix, err := webindex.New(&webindex.Options{MaxConcurrentQueries: 1, QueueWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h := ix.Handler(db, indextest.Quiet)
	done := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/top", nil))
		done <- rec.Code
	}()
	<-cs.Entered
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/top", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "none finished within") {
		t.Errorf("queued past QueueWait: %d %s, want 503 saying no slot freed in time", rec.Code, rec.Body)
	}
	release()
	if code := <-done; code != http.StatusOK {
		t.Errorf("held request: status %d", code)
	}
}

// TestHandlerQueueWaitEndsWithRequest checks that a request waiting for a
// slot gives up when its context ends, however long QueueWait is.
func TestHandlerQueueWaitEndsWithRequest(t *testing.T) {
	e := indextest.New(t)
	e.Put(&extract.Page{URL: "http://a.example/", Title: "A", Text: "alpha"})
	e.Settle()
	cs := &indextest.CountingStore{Store: e.Store}
	db := e.Reader(cs)
	cs.Hold, cs.Entered = make(chan struct{}), make(chan struct{}, 2)
	ix, err := webindex.New(&webindex.Options{MaxConcurrentQueries: 1, QueueWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := ix.Handler(db, indextest.Quiet)
	done := make(chan int, 1)
	go func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/top", nil))
		done <- rec.Code
	}()
	<-cs.Entered

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/api/top", nil).WithContext(ctx))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), context.Canceled.Error()) {
		t.Errorf("request ended while waiting: %d %s, want 503 naming the cancellation", rec.Code, rec.Body)
	}
	close(cs.Hold)
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
	if o.MaxConcurrentQueries < 4 || o.MaxQueuedQueries != 256 || o.QueueWait != 10*time.Second || o.MaxResults != 1000 || o.Scoring != (webindex.Scoring{K1: 1.2, BodyWeight: 1, BodyB: 0.75, AnchorWeight: 2, AnchorB: 0.5, TitleWeight: 3, URLWeight: 2,
		TitleMatchBoost: 0.5, AnchorMatchBoost: 0.25, PhraseBoost: 0.5, ProximityBoost: 0.25, RerankDepth: 50, PriorWeight: 0.1, PriorCap: 1000}) {
		t.Errorf("defaults %+v", o)
	}
}
