package runner

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// The runner's HTTP server lets a bounded number of requests in at once;
// the rest wait briefly, then get 503 with Retry-After.
func TestHTTPConcurrencyIsBounded(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := limitConcurrency(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}), 2, 10*time.Millisecond)
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range codes {
		wg.Go(func() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
			codes[i] = rec.Code
		})
		<-entered
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("a request beyond the limit: %d, Retry-After %q; want 503 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	close(release)
	wg.Wait()
	for _, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("requests within the limit: %v", codes)
		}
	}
	// The slots are free again.
	go func() { <-entered }()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("after the others finished: %d", rec.Code)
	}
}
