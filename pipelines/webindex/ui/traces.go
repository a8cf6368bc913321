package ui

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/trickle-dev/trickle/telemetry"
)

// WithTraces serves /traces and /trace from the traces r keeps (the
// runner's), and links each page's view to the chains that touched it.
func WithTraces(r *telemetry.Recent) ServerOption {
	return func(s *server) { s.traces = r }
}

// tracesShown bounds the traces a list shows.
const tracesShown = 100

// traceRow is one chain in the list of traces.
type traceRow struct {
	ID        string
	Start     time.Time
	Duration  time.Duration
	Spans     int
	Observers []string
	Rows      []string
	Errors    int
	Conflicts int
	Processes []string
}

// traceList is the data of the traces page.
type traceList struct {
	Traces             []traceRow
	Observer, URL      string
	Errors, Slowest    bool
	Kept, Limit        int
	Sample             float64
	ClearURL, ErrorURL string
	SlowURL, NewestURL string
}

func (s *server) tracesPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := telemetry.TraceFilter{Observer: q.Get("observer"), Row: q.Get("url"), Errors: q.Get("errors") == "1", Slowest: q.Get("sort") == "slowest", Limit: tracesShown}
	d := traceList{Observer: f.Observer, URL: f.Row, Errors: f.Errors, Slowest: f.Slowest, Sample: s.traces.Sample()}
	d.Kept, d.Limit = s.traces.Kept()
	link := func(change func(url.Values)) string {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		change(v)
		if len(v) == 0 {
			return "traces"
		}
		return "traces?" + v.Encode()
	}
	d.ClearURL = "traces"
	d.ErrorURL = link(func(v url.Values) { v.Set("errors", "1") })
	d.SlowURL = link(func(v url.Values) { v.Set("sort", "slowest") })
	d.NewestURL = link(func(v url.Values) { v.Del("sort") })
	for _, t := range s.traces.List(f) {
		row := traceRow{ID: t.ID, Start: t.Start(), Duration: t.Duration(), Spans: len(t.Spans), Errors: t.Errors(),
			Observers: t.Values(telemetry.ObserverAttr), Rows: t.Values(telemetry.RowAttr), Processes: processes(t)}
		for _, sp := range t.Spans {
			row.Conflicts += count(sp.Attr("trickle.conflicts"))
		}
		d.Traces = append(d.Traces, row)
	}
	title := "Traces"
	if f.Row != "" {
		title = "Traces of " + f.Row
	}
	s.render(w, r, "traces", view{Title: title, Data: d})
}

// spanRow is one span of a trace's waterfall: its depth under its parent
// and where its bar lies, as parts of 1000 of the trace's duration.
type spanRow struct {
	telemetry.Span
	Depth            int
	Offset           time.Duration
	BarX, BarW       int
	Outcome, Process string
	Observer, Row    string
}

// Indent is the span's name as indented in the waterfall.
func (r spanRow) Indent() string { return strings.Repeat("\u00a0\u00a0", r.Depth) }

func (s *server) tracePage(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("missing id parameter: trace?id=ID"))
		return
	}
	t, ok := s.traces.Get(id)
	if !ok {
		n, limit := s.traces.Kept()
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("no trace %s among the %d kept (at most %d: older ones are gone)", id, n, limit))
		return
	}
	s.render(w, r, "trace", view{Title: "Trace " + id, Data: struct {
		T     *telemetry.Trace
		Spans []spanRow
		Took  time.Duration
	}{t, waterfall(t), t.Duration()}})
}

// waterfall lays out t's spans: each under its parent (a span whose
// parent this process did not record starts a tree of its own), in start
// order, with its bar.
func waterfall(t *telemetry.Trace) []spanRow {
	start, total := t.Start(), t.Duration()
	children := map[string][]int{}
	seen := map[string]bool{}
	for _, sp := range t.Spans {
		seen[sp.ID] = true
	}
	var roots []int
	for i, sp := range t.Spans {
		if sp.ParentID != "" && seen[sp.ParentID] {
			children[sp.ParentID] = append(children[sp.ParentID], i)
		} else {
			roots = append(roots, i)
		}
	}
	var out []spanRow
	var walk func(i, depth int)
	walk = func(i, depth int) {
		sp := t.Spans[i]
		row := spanRow{Span: sp, Depth: depth, Offset: sp.Start.Sub(start), Process: sp.Service,
			Observer: sp.Attr(telemetry.ObserverAttr), Row: sp.Attr(telemetry.RowAttr), Outcome: outcome(sp)}
		if total > 0 {
			row.BarX = int(1000 * row.Offset / total)
			row.BarW = max(1, int(1000*sp.Duration()/total))
		} else {
			row.BarW = 1000
		}
		out = append(out, row)
		for _, c := range children[sp.ID] {
			walk(c, depth+1)
		}
	}
	for _, i := range roots {
		walk(i, 0)
	}
	return out
}

// outcome is what a span's row says of how it ended: an observer run's
// outcome with its retries, or the error.
func outcome(sp telemetry.Span) string {
	o := sp.Attr("trickle.outcome")
	if c := count(sp.Attr("trickle.conflicts")); c > 0 {
		o = strings.TrimSpace(fmt.Sprintf("%s, %d conflict%s (retried)", o, c, plural(c)))
	}
	if sp.Error != "" {
		o = strings.TrimPrefix(o+"; ", "; ") + "error: " + sp.Error
	}
	return o
}

func processes(t *telemetry.Trace) []string {
	var out []string
	for _, sp := range t.Spans {
		if sp.Service != "" && !slices.Contains(out, sp.Service) {
			out = append(out, sp.Service)
		}
	}
	return out
}

// count reads a span's count attribute; 0 if it has none.
func count(v string) int {
	n, _ := strconv.Atoi(v)
	return n
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
