package ui

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/query"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/telemetry"
)

//go:embed templates/*.html
var templateFS embed.FS

// PageSize is how many entries a page of a list shows.
const PageSize = 20

// linksShown is how many inlinks and outlinks a page's view lists before
// linking to their own paged lists.
const linksShown = 10

// templates render the pages; html/template escapes every value for
// where it lands (text, attribute, URL query parameter).
var templates = template.Must(template.New("").Funcs(template.FuncMap{"oneTarget": oneTarget, "pct": func(f float64) float64 { return 100 * f }, "sub": func(a, b int) int { return a - b }, "dur": shortDuration}).ParseFS(templateFS, "templates/*.html"))

// shortDuration rounds d to what a reader compares at a glance: three or
// four significant digits.
func shortDuration(d time.Duration) time.Duration {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond)
	case d < time.Second:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Millisecond)
}

// oneTarget reports whether every link of ls goes to the same page: a
// list of a page's inlinks then needs no column repeating that page on
// every row (the links into a cluster with duplicates go to several).
func oneTarget(ls []schema.Inlink) bool {
	for _, l := range ls {
		if l.Target != ls[0].Target {
			return false
		}
	}
	return true
}

// Server returns an http.Handler serving the web index UI as HTML pages
// rendered on the server, so that every view reads without JavaScript and
// every view is a plain link:
//
//	/                          overview (pages, clusters, links, last change) and the top list
//	/search?q=Q&offset=O       search results with highlighted snippets
//	/page?url=U                a page: canonical, duplicates, the first inlinks and outlinks
//	/inlinks?url=U&offset=O    all inlinks of a page's cluster, paged
//	/outlinks?url=U&offset=O   all outlinks of a page, paged
//	/site?host=H&offset=O      the canonicals of one host by inbound links, paged
//	/status                    with WithStatus: observers and their lag, failures, workers, export queues
//	/traces?observer=O&url=U   with WithTraces: the latest observer chains (errors=1, sort=slowest)
//	/trace?id=ID               with WithTraces: one chain as a waterfall
//	/style.css                 the stylesheet
//
// /search and /page take as_of=T (webindex.ParseAsOf: an RFC 3339 time,
// a negative duration such as -10m, or a timestamp) to show the index as
// it was then, say so at the top of the page, and keep as_of in their
// links and search form; a T older than the history the deployment keeps
// is 410.
//
// Lists show PageSize entries with links to the previous and next page.
// Mount it at the root of the mux that serves ix's JSON API under /api/
// (which stays the interface for programs):
//
//	mux.Handle("/api/", ix.Handler(db, log))
//	mux.Handle("/", ui.Server(ix, db, log))
//
// Every value shown is escaped by html/template; snippets mark the query
// terms with <mark>. An unknown path is 404, a method other than GET or
// HEAD 405, a malformed parameter 400, a page not loaded 404, and a busy
// or failing index 500 with the error logged.
func Server(ix *webindex.Index, db *framework.DB, log *slog.Logger, opts ...ServerOption) http.Handler {
	if log == nil {
		log = slog.Default()
	}
	s := &server{ix: ix, db: db, log: log}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", s.overview)
	mux.HandleFunc("/search", s.search)
	mux.HandleFunc("/page", s.page)
	mux.HandleFunc("/inlinks", linksPage(s, "inlinks", "Inlinks of ", func(ctx context.Context, u string, offset int) ([]schema.Inlink, int, error) {
		p, err := s.ix.Inlinks(ctx, s.db, u, offset, PageSize)
		if err != nil {
			return nil, 0, err
		}
		return p.Links, p.Total, nil
	}))
	mux.HandleFunc("/outlinks", linksPage(s, "outlinks", "Outlinks of ", func(ctx context.Context, u string, offset int) ([]query.Outlink, int, error) {
		p, err := s.ix.Outlinks(ctx, s.db, u, offset, PageSize)
		if err != nil {
			return nil, 0, err
		}
		return p.Links, p.Total, nil
	}))
	mux.HandleFunc("/site", s.site)
	if s.status != nil {
		mux.HandleFunc("/status", s.statusPage)
	}
	if s.traces != nil {
		mux.HandleFunc("/traces", s.tracesPage)
		mux.HandleFunc("/trace", s.tracePage)
	}
	mux.HandleFunc("/style.css", serve)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no page %s", r.URL.Path))
	})
	return methods(mux)
}

// methods answers 405 to anything but GET and HEAD.
func methods(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

type server struct {
	ix  *webindex.Index
	db  *framework.DB
	log *slog.Logger
	// status gathers the status page (nil: none); see WithStatus.
	status StatusFunc
	// traces are the chains the traces pages draw (nil: none); see
	// WithTraces.
	traces *telemetry.Recent
	// history is what the status page charts (nil: no charts); see
	// WithHistory.
	history *History
}

// view is what every template gets.
type view struct {
	Title string
	Query string
	Data  any
	// Pager links the list's neighbouring pages.
	Pager *pager
	// AsOf is the timestamp of the past snapshot a page or search shows
	// (as_of), kept in its links; AsOfTime is when that was. Empty for now.
	AsOf, AsOfTime string
	// Refresh, if not 0, reloads the page every that many seconds.
	Refresh int
	// StatusLink shows the link to the status page, TracesLink to the
	// traces page.
	StatusLink, TracesLink bool
}

// asOf reads the as_of parameter (webindex.ParseAsOf), answering 400
// itself when it is malformed; it fills v's AsOf fields.
func (s *server) asOf(w http.ResponseWriter, r *http.Request, v *view) (uint64, bool) {
	ts, err := query.ParseAsOf(r.URL.Query().Get("as_of"), time.Now())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return 0, false
	}
	if ts != 0 {
		v.AsOf = strconv.FormatUint(ts, 10)
		v.AsOfTime = framework.TimeOf(ts).UTC().Format(time.RFC3339Nano)
	}
	return ts, true
}

// pager describes a page of a list: entries From to To of Total, with the
// links to the previous and next page (empty when there is none).
type pager struct {
	From, To, Total int
	Prev, Next      string
}

// newPager makes the pager of the page at offset with n entries of total,
// whose neighbours are at path with params plus their offset.
func newPager(path string, params url.Values, offset, n, total int) *pager {
	p := &pager{From: offset + 1, To: offset + n, Total: total}
	link := func(o int) string {
		v := url.Values{}
		for k, vs := range params {
			v[k] = vs
		}
		if o > 0 {
			v.Set("offset", strconv.Itoa(o))
		}
		if len(v) == 0 {
			return path
		}
		return path + "?" + v.Encode()
	}
	if offset > 0 {
		p.Prev = link(max(0, offset-PageSize))
	}
	if offset+n < total {
		p.Next = link(offset + PageSize)
	}
	if n == 0 {
		p.From = offset
	}
	return p
}

func (s *server) overview(w http.ResponseWriter, r *http.Request) {
	offset, ok := s.offset(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	o, err := s.ix.Overview(ctx, s.db)
	if err != nil {
		s.fail(w, r, 0, err)
		return
	}
	top, err := s.ix.TopPage(ctx, s.db, offset, PageSize)
	if err != nil {
		s.fail(w, r, 0, err)
		return
	}
	s.render(w, r, "overview", view{Title: "Web index", Data: struct {
		O          *query.Overview
		LastChange string
		Top        *query.ResultPage
	}{o, lastChange(o.LastChange), top}, Pager: newPager("./", nil, offset, len(top.Results), top.Total)})
}

func lastChange(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.Format(time.RFC3339)
}

// hit is a search result with its snippet cut into marked and unmarked
// pieces, which the template escapes.
type hit struct {
	query.Result
	Pieces []piece
}

type piece struct {
	Text string
	Mark bool
}

func pieces(s *query.Snippet) []piece {
	if s == nil {
		return nil
	}
	var out []piece
	at := 0
	for _, h := range s.Highlights {
		if h[0] < at || h[1] > len(s.Text) || h[0] > h[1] {
			break // not from this index: show the rest unmarked
		}
		if h[0] > at {
			out = append(out, piece{Text: s.Text[at:h[0]]})
		}
		out = append(out, piece{Text: s.Text[h[0]:h[1]], Mark: true})
		at = h[1]
	}
	if at < len(s.Text) {
		out = append(out, piece{Text: s.Text[at:]})
	}
	return out
}

func (s *server) search(w http.ResponseWriter, r *http.Request) {
	offset, ok := s.offset(w, r)
	if !ok {
		return
	}
	q := r.URL.Query().Get("q")
	v := view{Title: "“" + q + "”", Query: q}
	asOf, ok := s.asOf(w, r, &v)
	if !ok {
		return
	}
	res, err := s.ix.SearchPage(r.Context(), s.db, query.SearchRequest{Query: q, Offset: offset, Limit: PageSize, Snippets: true, AsOf: asOf})
	if err != nil {
		s.fail(w, r, 0, err)
		return
	}
	hits := make([]hit, len(res.Results))
	for i, r := range res.Results {
		hits[i] = hit{Result: r, Pieces: pieces(r.Snippet)}
	}
	v.Data = struct {
		Total int
		Hits  []hit
	}{res.Total, hits}
	params := url.Values{"q": {q}}
	if v.AsOf != "" {
		params.Set("as_of", v.AsOf)
	}
	v.Pager = newPager("search", params, offset, len(hits), res.Total)
	s.render(w, r, "search", v)
}

func (s *server) page(w http.ResponseWriter, r *http.Request) {
	u, ok := s.url(w, r)
	if !ok {
		return
	}
	var v view
	asOf, ok := s.asOf(w, r, &v)
	if !ok {
		return
	}
	pv, err := s.ix.PageAt(r.Context(), s.db, u, asOf)
	if err != nil {
		s.fail(w, r, 0, err)
		return
	}
	pv.Inlinks, pv.Outlinks = pv.Inlinks[:min(linksShown, len(pv.Inlinks))], pv.Outlinks[:min(linksShown, len(pv.Outlinks))]
	v.Title = pv.Title
	if v.Title == "" {
		v.Title = pv.URL
	}
	v.Data = struct {
		P      *query.PageView
		Host   string
		Chains int // traces kept that touched the page; -1 without WithTraces
	}{pv, hostOf(pv.URL), s.chains(pv.URL)}
	s.render(w, r, "page", v)
}

// chains counts the traces kept that ran an observer on the page u; -1
// when the server draws no traces.
func (s *server) chains(u string) int {
	if s.traces == nil {
		return -1
	}
	return s.traces.Count(telemetry.TraceFilter{Row: u})
}

func hostOf(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Host
}

// linksPage serves a page of a page's links (in or out) with the
// template name, as list fetches them (one page of PageSize from offset,
// and how many there are in all).
func linksPage[L any](s *server, name, title string, list func(ctx context.Context, u string, offset int) ([]L, int, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		u, ok := s.url(w, r)
		if !ok {
			return
		}
		offset, ok := s.offset(w, r)
		if !ok {
			return
		}
		links, total, err := list(r.Context(), u, offset)
		if err != nil {
			s.fail(w, r, 0, err)
			return
		}
		s.render(w, r, name, view{Title: title + u, Data: struct {
			URL   string
			Links []L
		}{u, links}, Pager: newPager(name, url.Values{"url": {u}}, offset, len(links), total)})
	}
}

func (s *server) site(w http.ResponseWriter, r *http.Request) {
	offset, ok := s.offset(w, r)
	if !ok {
		return
	}
	host := r.URL.Query().Get("host")
	p, err := s.ix.SitePage(r.Context(), s.db, host, offset, PageSize)
	if err != nil {
		s.fail(w, r, 0, err)
		return
	}
	s.render(w, r, "site", view{Title: "Site " + host, Data: struct {
		Host    string
		Results []query.Result
	}{host, p.Results}, Pager: newPager("site", url.Values{"host": {host}}, offset, len(p.Results), p.Total)})
}

// url reads the url parameter, answering 400 itself when it is missing.
func (s *server) url(w http.ResponseWriter, r *http.Request) (string, bool) {
	u := r.URL.Query().Get("url")
	if u == "" {
		s.fail(w, r, http.StatusBadRequest, errors.New("missing url parameter"))
		return "", false
	}
	return u, true
}

// offset reads the offset parameter, answering 400 itself when it is
// malformed.
func (s *server) offset(w http.ResponseWriter, r *http.Request) (int, bool) {
	v := r.URL.Query().Get("offset")
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("parameter offset=%q: want a non-negative integer", v))
		return 0, false
	}
	return n, true
}

// render executes the template name with v into a buffer first, so that a
// failure half way is an error page rather than half a page.
func (s *server) render(w http.ResponseWriter, r *http.Request, name string, v view) {
	s.write(w, r, http.StatusOK, name, v)
}

func (s *server) write(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	v.StatusLink = s.status != nil
	v.TracesLink = s.traces != nil
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, v); err != nil {
		s.log.ErrorContext(r.Context(), "UI page failed", "path", r.URL.Path, "err", err)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'none'")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// fail renders an error page; status 0 derives it from err.
func (s *server) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status == 0 {
		switch {
		case errors.Is(err, extract.ErrBadURL), errors.Is(err, query.ErrBadQuery), errors.Is(err, framework.ErrFutureSnapshot):
			status = http.StatusBadRequest
		case errors.Is(err, framework.ErrSnapshotTooOld):
			status = http.StatusGone
			err = fmt.Errorf("as_of is older than the history the deployment keeps (see the runner's -gc-lag): %w", err)
		case errors.Is(err, query.ErrPageNotFound):
			status = http.StatusNotFound
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			status = http.StatusServiceUnavailable
		default:
			status = http.StatusInternalServerError
			s.log.ErrorContext(r.Context(), "UI request failed", "path", r.URL.Path, "err", err)
		}
	}
	s.write(w, r, status, "error", view{Title: http.StatusText(status), Query: r.URL.Query().Get("q"), Data: struct {
		Status  int
		Message string
	}{status, err.Error()}})
}
