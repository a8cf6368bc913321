package api

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
	"github.com/trickle-dev/trickle/pipelines/webindex/query"
)

// Limits bound what a Handler serves: the length of its lists, and the
// requests it serves and queues at once: webindex.Options' fields of the
// same names (Index.Handler fills them from its options).
type Limits struct {
	MaxResults           int
	MaxConcurrentQueries int
	MaxQueuedQueries     int
	QueueWait            time.Duration
}

// Handler serves the index's JSON API over db:
//
//	GET /api/overview                         a query.Overview
//	GET /api/page?url=U&links=L               a query.PageView, its inlinks and outlinks cut to L
//	GET /api/search?q=Q&offset=O&limit=N      a query.ResultPage (snippets=1: with snippets)
//	GET /api/top?offset=O&limit=N             a query.ResultPage (n=N is limit's older name)
//	GET /api/site?host=H&offset=O&limit=N     a query.ResultPage of the canonicals on host H
//	GET /api/inlinks?url=U&offset=O&limit=N   a query.InlinkPage
//	GET /api/outlinks?url=U&offset=O&limit=N  a query.OutlinkPage
//
// limit, n and links default to 10 (links: 20) and are capped at
// Limits.MaxResults (default 1000): a larger value returns at most that
// many. offset defaults to 0; a search may reach query.MaxSearchDepth results
// deep (else 400), and may have at most query.MaxQueryTerms distinct terms (else
// 400). A PageView's inlinks_total and outlinks_total count the lists
// before the cut; /api/inlinks and /api/outlinks page through them.
//
// page and search take as_of=T to read the index as it was at T (an RFC
// 3339 time, a negative duration such as -10m, or a timestamp; see
// query.ParseAsOf), within the history garbage collection keeps: older is 410
// Gone, later than now 400.
//
// Snippets cost a read of up to schema.ExcerptBytes per result, so they are only
// made when asked for. A search result's snippet is
// {"text": T, "highlights": [[S, E], …]}:
// T is plain text (escape it before putting it into HTML) and each [S, E)
// is a query-term occurrence as byte offsets into T's UTF-8 encoding (a
// JavaScript client converts them, e.g. with TextEncoder).
//
// The handler serves at most Limits.MaxConcurrentQueries requests at a
// time; up to Limits.MaxQueuedQueries more wait for a slot in arrival
// order, each as long as its request lasts and at most Limits.QueueWait,
// then is answered 503 with a Retry-After header; a request that finds
// the queue full is answered 503 at once. Each Handler has its own slots
// and queue.
//
// Errors are {"error": "…"} with a 4xx or 5xx status. Mount it on "/api/".
//
// U is any spelling of the page's URL that extract.Normalize maps to the
// page's key ("operator%3D.html" finds "operator=.html"), escaped as a query
// parameter value (url.QueryEscape). The parameter is decoded once, so an
// unescaped %2F in U would arrive as "/" and name another page; a U that
// Normalize rejects is a 400.
func Handler(ix *query.Engine, db *framework.DB, log *slog.Logger, lim Limits) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	a := &api{ix: ix, db: db, log: log, lim: lim, slots: make(chan struct{}, lim.MaxConcurrentQueries), queue: make(chan struct{}, max(0, lim.MaxQueuedQueries))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/overview", a.limited(a.overview))
	mux.HandleFunc("GET /api/page", a.limited(a.page))
	mux.HandleFunc("GET /api/search", a.limited(a.search))
	mux.HandleFunc("GET /api/top", a.limited(a.top))
	mux.HandleFunc("GET /api/site", a.limited(a.site))
	mux.HandleFunc("GET /api/inlinks", a.limited(a.links(func(ctx context.Context, u string, offset, limit int) (any, error) {
		return ix.Inlinks(ctx, db, u, offset, limit)
	})))
	mux.HandleFunc("GET /api/outlinks", a.limited(a.links(func(ctx context.Context, u string, offset, limit int) (any, error) {
		return ix.Outlinks(ctx, db, u, offset, limit)
	})))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		a.fail(w, r, http.StatusNotFound, fmt.Errorf("no API endpoint %s %s", r.Method, r.URL.Path))
	})
	return mux
}

type api struct {
	ix  *query.Engine
	db  *framework.DB
	log *slog.Logger
	lim Limits
	// slots holds a token for each request being served, queue one for
	// each request waiting for a slot.
	slots, queue chan struct{}
}

// retryAfter is the Retry-After header of a 503: a query takes
// milliseconds, so a second is plenty to find a slot.
const retryAfter = "1"

// limited runs h in a query slot, answering 503 itself when it gets none.
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

// admit takes a query slot: at once if one is free, else after waiting in
// the queue (if it has room) while r's context lasts, at most QueueWait.
// Waiting senders on a channel are woken in arrival order, so the queue
// is first come, first served.
func (a *api) admit(r *http.Request) error {
	select {
	case a.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case a.queue <- struct{}{}:
	default:
		return fmt.Errorf("server overloaded: %d queries running and %d waiting; retry later", cap(a.slots), cap(a.queue))
	}
	defer func() { <-a.queue }()
	t := time.NewTimer(a.lim.QueueWait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-t.C:
		return fmt.Errorf("server busy: %d queries running and none finished within %v; retry later", cap(a.slots), a.lim.QueueWait)
	case <-r.Context().Done():
		return fmt.Errorf("server busy: %d queries running; request ended while waiting: %w", cap(a.slots), context.Cause(r.Context()))
	}
}

func (a *api) page(w http.ResponseWriter, r *http.Request) {
	u, ok := a.urlParam(w, r)
	if !ok {
		return
	}
	links, ok := a.intParam(w, r, "links", 20)
	if !ok {
		return
	}
	asOf, ok := a.asOf(w, r)
	if !ok {
		return
	}
	pv, err := a.ix.PageAt(r.Context(), a.db, u, asOf)
	if err != nil {
		a.failFor(w, r, err)
		return
	}
	links = min(links, a.lim.MaxResults)
	pv.Inlinks, pv.Outlinks = pv.Inlinks[:min(links, len(pv.Inlinks))], pv.Outlinks[:min(links, len(pv.Outlinks))]
	a.reply(w, r, pv)
}

func (a *api) overview(w http.ResponseWriter, r *http.Request) {
	o, err := a.ix.Overview(r.Context(), a.db)
	if err != nil {
		a.failFor(w, r, err)
		return
	}
	a.reply(w, r, o)
}

func (a *api) search(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := a.window(w, r, "limit")
	if !ok {
		return
	}
	asOf, ok := a.asOf(w, r)
	if !ok {
		return
	}
	p, err := a.ix.SearchPage(r.Context(), a.db, query.SearchRequest{Query: r.URL.Query().Get("q"), Offset: offset, Limit: limit, Snippets: r.URL.Query().Get("snippets") == "1", AsOf: asOf})
	if err != nil {
		a.failFor(w, r, err)
		return
	}
	a.reply(w, r, p)
}

func (a *api) top(w http.ResponseWriter, r *http.Request) {
	name := "limit"
	if r.URL.Query().Has("n") {
		name = "n"
	}
	offset, limit, ok := a.window(w, r, name)
	if !ok {
		return
	}
	p, err := a.ix.TopPage(r.Context(), a.db, offset, limit)
	if err != nil {
		a.failFor(w, r, err)
		return
	}
	a.reply(w, r, p)
}

func (a *api) site(w http.ResponseWriter, r *http.Request) {
	offset, limit, ok := a.window(w, r, "limit")
	if !ok {
		return
	}
	p, err := a.ix.SitePage(r.Context(), a.db, r.URL.Query().Get("host"), offset, limit)
	if err != nil {
		a.failFor(w, r, err)
		return
	}
	a.reply(w, r, p)
}

// links serves a page of a page's links (in or out), as list fetches it.
func (a *api) links(list func(ctx context.Context, u string, offset, limit int) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, ok := a.urlParam(w, r)
		if !ok {
			return
		}
		offset, limit, ok := a.window(w, r, "limit")
		if !ok {
			return
		}
		p, err := list(r.Context(), u, offset, limit)
		if err != nil {
			a.failFor(w, r, err)
			return
		}
		a.reply(w, r, p)
	}
}

// asOf reads the as_of parameter (query.ParseAsOf), answering 400 itself when
// it is malformed.
func (a *api) asOf(w http.ResponseWriter, r *http.Request) (uint64, bool) {
	ts, err := query.ParseAsOf(r.URL.Query().Get("as_of"), time.Now())
	if err != nil {
		a.fail(w, r, http.StatusBadRequest, err)
		return 0, false
	}
	return ts, true
}

// failFor answers err with the status it calls for.
func (a *api) failFor(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, extract.ErrBadURL), errors.Is(err, query.ErrBadQuery), errors.Is(err, framework.ErrFutureSnapshot):
		a.fail(w, r, http.StatusBadRequest, err)
	case errors.Is(err, framework.ErrSnapshotTooOld):
		a.fail(w, r, http.StatusGone, fmt.Errorf("as_of is older than the history the deployment keeps (see the runner's -gc-lag): %w", err))
	case errors.Is(err, query.ErrPageNotFound):
		a.fail(w, r, http.StatusNotFound, err)
	default:
		a.fail(w, r, http.StatusInternalServerError, err)
	}
}

// urlParam reads the url parameter, answering 400 itself when it is
// missing.
func (a *api) urlParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	u := r.URL.Query().Get("url")
	if u == "" {
		a.fail(w, r, http.StatusBadRequest, errors.New("missing url parameter"))
		return "", false
	}
	return u, true
}

// window reads the offset parameter and the limit parameter called name.
func (a *api) window(w http.ResponseWriter, r *http.Request, name string) (offset, limit int, ok bool) {
	if offset, ok = a.intParam(w, r, "offset", 0); !ok {
		return 0, 0, false
	}
	limit, ok = a.intParam(w, r, name, 10)
	return offset, limit, ok
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
