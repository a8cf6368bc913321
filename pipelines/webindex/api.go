package webindex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// Handler serves the index's JSON API over db:
//
//	GET /api/page?url=U           a PageView; 404 if U is not loaded
//	GET /api/search?q=Q&limit=N   {"total": T, "results": [Result…]}
//	GET /api/top?n=N              {"results": [Result…]}
//
// limit and n default to 10 and are capped at Options.MaxResults (default
// 1000): a larger value returns at most that many results. A search query
// may have at most MaxQueryTerms distinct terms (else 400).
//
// The handler serves at most Options.MaxConcurrentQueries requests at a
// time; one beyond that waits up to Options.QueueWait for a slot, then is
// answered 503 with a Retry-After header. Each Handler has its own slots.
//
// Errors are {"error": "…"} with a 4xx or 5xx status. Mount it on "/api/".
//
// U is any spelling of the page's URL that extract.Normalize maps to the
// page's key ("operator%3D.html" finds "operator=.html"), escaped as a query
// parameter value (url.QueryEscape). The parameter is decoded once, so an
// unescaped %2F in U would arrive as "/" and name another page; a U that
// Normalize rejects is a 400.
func (ix *Index) Handler(db *framework.DB, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	a := &api{ix: ix, db: db, log: log, slots: make(chan struct{}, ix.opts.MaxConcurrentQueries)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/page", a.limited(a.page))
	mux.HandleFunc("GET /api/search", a.limited(a.search))
	mux.HandleFunc("GET /api/top", a.limited(a.top))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, http.StatusNotFound, fmt.Errorf("no API endpoint %s %s", r.Method, r.URL.Path))
	})
	return mux
}

type api struct {
	ix  *Index
	db  *framework.DB
	log *slog.Logger
	// slots holds a token for each request being served.
	slots chan struct{}
}

// retryAfter is the Retry-After header of a 503: a query takes
// milliseconds, so a second is plenty to find a slot.
const retryAfter = "1"

// limited runs h in a query slot, answering 503 itself when none frees up
// in time.
func (a *api) limited(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := a.admit(r); err != nil {
			a.log.DebugContext(r.Context(), "API request refused", "path", r.URL.Path, "err", err)
			w.Header().Set("Retry-After", retryAfter)
			a.fail(w, r, http.StatusServiceUnavailable, err)
			return
		}
		defer func() { <-a.slots }()
		h(w, r)
	}
}

// admit takes a query slot, waiting at most QueueWait and as long as r's
// context lasts.
func (a *api) admit(r *http.Request) error {
	select {
	case a.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(a.ix.opts.QueueWait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-t.C:
		return fmt.Errorf("server busy: %d queries running and none finished within %v; retry later", cap(a.slots), a.ix.opts.QueueWait)
	case <-r.Context().Done():
		return fmt.Errorf("server busy: %d queries running; request ended while waiting: %w", cap(a.slots), context.Cause(r.Context()))
	}
}

func (a *api) page(w http.ResponseWriter, r *http.Request) {
	u := r.URL.Query().Get("url")
	if u == "" {
		a.fail(w, r, http.StatusBadRequest, errors.New("missing url parameter"))
		return
	}
	pv, err := a.ix.Page(r.Context(), a.db, u)
	switch {
	case errors.Is(err, extract.ErrBadURL):
		a.fail(w, r, http.StatusBadRequest, err)
	case errors.Is(err, ErrPageNotFound):
		a.fail(w, r, http.StatusNotFound, err)
	case err != nil:
		a.fail(w, r, http.StatusInternalServerError, err)
	default:
		a.reply(w, r, pv)
	}
}

func (a *api) search(w http.ResponseWriter, r *http.Request) {
	limit, ok := a.intParam(w, r, "limit", 10)
	if !ok {
		return
	}
	total, results, err := a.ix.Search(r.Context(), a.db, r.URL.Query().Get("q"), limit)
	switch {
	case errors.Is(err, ErrBadQuery):
		a.fail(w, r, http.StatusBadRequest, err)
		return
	case err != nil:
		a.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	a.reply(w, r, struct {
		Total   int      `json:"total"`
		Results []Result `json:"results"`
	}{total, results})
}

func (a *api) top(w http.ResponseWriter, r *http.Request) {
	n, ok := a.intParam(w, r, "n", 10)
	if !ok {
		return
	}
	results, err := a.ix.Top(r.Context(), a.db, n)
	if err != nil {
		a.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	a.reply(w, r, struct {
		Results []Result `json:"results"`
	}{results})
}

// intParam reads a non-negative integer query parameter, answering 400
// itself when it is malformed.
func (a *api) intParam(w http.ResponseWriter, r *http.Request, name string, def int) (int, bool) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		a.fail(w, r, http.StatusBadRequest, fmt.Errorf("parameter %s=%q: want a non-negative integer", name, s))
		return 0, false
	}
	return n, true
}

func (a *api) reply(w http.ResponseWriter, r *http.Request, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		a.log.DebugContext(r.Context(), "writing API reply", "path", r.URL.Path, "err", err)
	}
}

func (a *api) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status == http.StatusInternalServerError {
		a.log.ErrorContext(r.Context(), "API request failed", "path", r.URL.Path, "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(struct {
		Error string `json:"error"`
	}{err.Error()})
}
