package telemetry

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Recent keeps the spans of the most recent traces in memory, so that a
// process can draw its observer chains without a tracing backend. It is a
// span processor: installed beside any exporter (RecentOptions in
// Options), it sees the spans this process records and no other
// process's; a chain that crossed processes shows here as the part this
// process ran, under the trace id every process shares.
//
// What it keeps is bounded (RecentOptions), and recording a span is an
// append under a lock; the spans it is handed are the ones the tracer
// provider's sampler kept.
type Recent struct {
	opts RecentOptions

	mu     sync.Mutex
	traces map[string]*Trace
	order  []string // trace ids, oldest first seen first
}

// RecentOptions bound what Recent keeps.
type RecentOptions struct {
	// Traces is how many traces are kept. A new one pushes out the one
	// first seen longest ago of the kind (the first observer recorded)
	// that holds the most, so that a busy pipeline's chains do not crowd
	// out a quieter one's. Default: 200.
	Traces int
	// SpansPerTrace bounds a trace's spans; past it, the trace counts the
	// spans it drops. Default: 256.
	SpansPerTrace int
	// Sample is the share of the traces this process starts that it
	// records when no OTEL_TRACES_SAMPLER says otherwise (a trace started
	// elsewhere is recorded if its start was: parent-based). Default: 0.1;
	// 1 records every one (Setup: at the cost of a few microseconds a
	// transaction).
	Sample float64
}

// EnsureDefaults fills unset fields and returns o.
func (o *RecentOptions) EnsureDefaults() *RecentOptions {
	if o.Traces == 0 {
		o.Traces = 200
	}
	if o.SpansPerTrace == 0 {
		o.SpansPerTrace = 256
	}
	if o.Sample == 0 {
		o.Sample = 0.1
	}
	return o
}

// Validate reports options that make no sense.
func (o *RecentOptions) Validate() error {
	switch {
	case o.Traces < 0:
		return errors.New("telemetry: RecentOptions.Traces must not be negative")
	case o.SpansPerTrace < 0:
		return errors.New("telemetry: RecentOptions.SpansPerTrace must not be negative")
	case o.Sample < 0 || o.Sample > 1:
		return errors.New("telemetry: RecentOptions.Sample must be between 0 and 1")
	}
	return nil
}

// NewRecent returns an empty Recent keeping what opts allow (nil: the
// defaults).
func NewRecent(opts *RecentOptions) (*Recent, error) {
	var o RecentOptions
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Recent{opts: o, traces: map[string]*Trace{}}, nil
}

// Span is one recorded span.
type Span struct {
	ID, ParentID string
	Name         string
	Service      string // the recording process's service.name
	Start, End   time.Time
	// Error is the span's error status description, or "" if it ended
	// well.
	Error string
	// Attributes are the span's own, as strings, sorted by key.
	Attributes []Attribute
}

// Attribute is a span attribute as shown.
type Attribute struct{ Key, Value string }

// Attr returns the value of the attribute key, or "".
func (s *Span) Attr(key string) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}

// Duration is how long the span ran.
func (s *Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Trace is the spans of one trace this process recorded, by start time.
type Trace struct {
	ID      string
	Spans   []Span
	Dropped int // spans past RecentOptions.SpansPerTrace

	observer string // the first observer recorded in it, for eviction
}

// Start is when the trace's first span started.
func (t *Trace) Start() time.Time { return t.Spans[0].Start }

// End is when its last span ended.
func (t *Trace) End() time.Time {
	var end time.Time
	for _, s := range t.Spans {
		if s.End.After(end) {
			end = s.End
		}
	}
	return end
}

// Duration is from the first start to the last end.
func (t *Trace) Duration() time.Duration { return t.End().Sub(t.Start()) }

// Errors counts the spans that ended in error.
func (t *Trace) Errors() int {
	n := 0
	for _, s := range t.Spans {
		if s.Error != "" {
			n++
		}
	}
	return n
}

// Values returns the distinct values of the attribute key over the
// trace's spans, in the order first met.
func (t *Trace) Values(key string) []string {
	var out []string
	for _, s := range t.Spans {
		if v := s.Attr(key); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// OnStart is part of sdktrace.SpanProcessor: Recent keeps spans as they
// end.
func (r *Recent) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd records s.
func (r *Recent) OnEnd(s sdktrace.ReadOnlySpan) {
	if r.opts.Traces <= 0 {
		return
	}
	sp := Span{
		ID:    s.SpanContext().SpanID().String(),
		Name:  s.Name(),
		Start: s.StartTime(),
		End:   s.EndTime(),
	}
	if p := s.Parent(); p.IsValid() {
		sp.ParentID = p.SpanID().String()
	}
	if st := s.Status(); st.Code == codes.Error {
		sp.Error = st.Description
		if sp.Error == "" {
			sp.Error = "error"
		}
	}
	if res := s.Resource(); res != nil {
		if v, ok := res.Set().Value("service.name"); ok {
			sp.Service = v.Emit()
		}
	}
	for _, a := range s.Attributes() {
		sp.Attributes = append(sp.Attributes, Attribute{Key: string(a.Key), Value: a.Value.Emit()})
	}
	slices.SortFunc(sp.Attributes, func(a, b Attribute) int { return strings.Compare(a.Key, b.Key) })
	id := s.SpanContext().TraceID().String()

	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.traces[id]
	if !ok {
		for len(r.order) >= r.opts.Traces {
			r.evict()
		}
		t = &Trace{ID: id}
		r.traces[id] = t
		r.order = append(r.order, id)
	}
	if len(t.Spans) >= r.opts.SpansPerTrace {
		t.Dropped++
		return
	}
	if t.observer == "" {
		t.observer = sp.Attr(ObserverAttr)
	}
	i, _ := slices.BinarySearchFunc(t.Spans, sp.Start, func(e Span, at time.Time) int { return e.Start.Compare(at) })
	t.Spans = slices.Insert(t.Spans, i, sp)
}

// evict drops the oldest trace of the kind that holds the most traces.
// It is linear in the traces kept, and runs once per new trace.
func (r *Recent) evict() {
	count := make(map[string]int, 8)
	most := 0
	for _, id := range r.order {
		k := r.traces[id].kind()
		count[k]++
		most = max(most, count[k])
	}
	for i, id := range r.order {
		if count[r.traces[id].kind()] == most {
			delete(r.traces, id)
			r.order = slices.Delete(r.order, i, i+1)
			return
		}
	}
}

// kind is what eviction balances: the first observer recorded in the
// trace, or the name of its first span when no observer ran in it.
func (t *Trace) kind() string {
	if t.observer != "" || len(t.Spans) == 0 {
		return t.observer
	}
	return t.Spans[0].Name
}

// Shutdown is part of sdktrace.SpanProcessor.
func (r *Recent) Shutdown(context.Context) error { return nil }

// ForceFlush is part of sdktrace.SpanProcessor.
func (r *Recent) ForceFlush(context.Context) error { return nil }

// TraceFilter selects traces from Recent.List.
type TraceFilter struct {
	// Observer keeps traces with a span of that observer
	// (trickle.observer).
	Observer string
	// Row keeps traces with a span on that row (trickle.row: a page's URL
	// in the web index).
	Row string
	// Errors keeps traces with a span that ended in error.
	Errors bool
	// Slowest orders by duration, longest first, instead of newest first.
	Slowest bool
	// Limit bounds the traces returned; 0: all that match.
	Limit int
}

// Observer and row attributes the framework's spans carry (package
// framework/notify sets them on observer runs).
const (
	ObserverAttr = "trickle.observer"
	RowAttr      = "trickle.row"
)

// List returns copies of the traces f selects, newest first (or slowest
// first).
func (r *Recent) List(f TraceFilter) []*Trace {
	r.mu.Lock()
	var out []*Trace
	for i := len(r.order) - 1; i >= 0; i-- {
		t := r.traces[r.order[i]]
		if f.matches(t) {
			out = append(out, t.clone())
		}
	}
	r.mu.Unlock()
	if f.Slowest {
		slices.SortStableFunc(out, func(a, b *Trace) int { return cmp.Compare(b.Duration(), a.Duration()) })
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out
}

// Count is how many traces f selects (its Limit aside), without copying
// them.
func (r *Recent) Count(f TraceFilter) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, id := range r.order {
		if f.matches(r.traces[id]) {
			n++
		}
	}
	return n
}

// Get returns a copy of the trace id, if kept.
func (r *Recent) Get(id string) (*Trace, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.traces[id]
	if !ok {
		return nil, false
	}
	return t.clone(), true
}

// Kept reports how many traces are kept and how many at most.
func (r *Recent) Kept() (n, limit int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.order), r.opts.Traces
}

// Sample is the share of its own traces the process records by default.
func (r *Recent) Sample() float64 { return r.opts.Sample }

func (f *TraceFilter) matches(t *Trace) bool {
	if len(t.Spans) == 0 {
		return false
	}
	if f.Errors && t.Errors() == 0 {
		return false
	}
	for _, want := range []struct{ key, value string }{{ObserverAttr, f.Observer}, {RowAttr, f.Row}} {
		if want.value != "" && !slices.Contains(t.Values(want.key), want.value) {
			return false
		}
	}
	return true
}

func (t *Trace) clone() *Trace {
	c := *t
	c.Spans = slices.Clone(t.Spans)
	return &c
}
