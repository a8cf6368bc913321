package telemetry_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/telemetry"
)

// recording returns a tracer whose every span Recent r records.
func recording(t *testing.T, opts *telemetry.RecentOptions) (trace.Tracer, *telemetry.Recent) {
	t.Helper()
	r, err := telemetry.NewRecent(opts)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return tp.Tracer("test"), r
}

// chain records a loader batch whose page's observer run has one
// transaction, the run on row url by observer obs, ending in err.
func chain(tr trace.Tracer, obs, url string, took time.Duration, err error) string {
	ctx, root := tr.Start(context.Background(), "loader batch")
	at := time.Now()
	_, run := tr.Start(ctx, "observer "+obs, trace.WithTimestamp(at), trace.WithAttributes(
		attribute.String(telemetry.ObserverAttr, obs), attribute.String(telemetry.RowAttr, url)))
	_, txn := tr.Start(trace.ContextWithSpan(ctx, run), "txn", trace.WithTimestamp(at.Add(time.Millisecond)))
	txn.End(trace.WithTimestamp(at.Add(took / 2)))
	if err != nil {
		run.RecordError(err)
		run.SetStatus(codes.Error, err.Error())
	}
	run.End(trace.WithTimestamp(at.Add(took)))
	root.End(trace.WithTimestamp(at.Add(took)))
	return root.SpanContext().TraceID().String()
}

// Rule: Recent groups a process's spans by trace, each trace's spans in
// start order with their parents, and finds traces by observer, by row,
// by error and by duration.
func TestRecentKeepsChainsAndFindsThem(t *testing.T) {
	tr, r := recording(t, nil)
	fast := chain(tr, "webindex-page", "http://a.example/", 2*time.Millisecond, nil)
	slow := chain(tr, "webindex-cluster", "sha256:ab", 40*time.Millisecond, nil)
	bad := chain(tr, "webindex-page", "http://b.example/", 5*time.Millisecond, errors.New("boom <b>"))

	got, ok := r.Get(fast)
	if !ok || len(got.Spans) != 3 {
		t.Fatalf("trace %s: %v %+v, want its 3 spans", fast, ok, got)
	}
	if got.Spans[0].Name != "loader batch" || got.Spans[1].Name != "observer webindex-page" || got.Spans[2].Name != "txn" {
		t.Errorf("spans out of start order: %s, %s, %s", got.Spans[0].Name, got.Spans[1].Name, got.Spans[2].Name)
	}
	if got.Spans[2].ParentID != got.Spans[1].ID || got.Spans[1].ParentID != got.Spans[0].ID {
		t.Errorf("parents lost: %+v", got.Spans)
	}
	ids := func(ts []*telemetry.Trace) (out []string) {
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		f    telemetry.TraceFilter
		want []string
	}{
		{"all, newest first", telemetry.TraceFilter{}, []string{bad, slow, fast}},
		{"by observer", telemetry.TraceFilter{Observer: "webindex-page"}, []string{bad, fast}},
		{"by row", telemetry.TraceFilter{Row: "http://a.example/"}, []string{fast}},
		{"errors", telemetry.TraceFilter{Errors: true}, []string{bad}},
		{"slowest", telemetry.TraceFilter{Slowest: true, Limit: 2}, []string{slow, bad}},
	} {
		if got := ids(r.List(tt.f)); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	b, _ := r.Get(bad)
	if b.Errors() != 1 || b.Spans[1].Error != "boom <b>" {
		t.Errorf("the failed run's error: %d spans in error, %q", b.Errors(), b.Spans[1].Error)
	}
}

// Rule: what Recent keeps is bounded: past Traces the trace first seen
// longest ago goes, and past SpansPerTrace a trace counts what it drops.
func TestRecentIsBounded(t *testing.T) {
	tr, r := recording(t, &telemetry.RecentOptions{Traces: 2, SpansPerTrace: 2})
	first := chain(tr, "o", "r1", time.Millisecond, nil)
	second := chain(tr, "o", "r2", time.Millisecond, nil)
	third := chain(tr, "o", "r3", time.Millisecond, nil)
	if _, ok := r.Get(first); ok {
		t.Errorf("the oldest trace is still kept past the bound of 2")
	}
	for _, id := range []string{second, third} {
		got, ok := r.Get(id)
		if !ok || len(got.Spans) != 2 || got.Dropped != 1 {
			t.Errorf("trace %s: kept %v, %d spans, %d dropped; want 2 spans and 1 dropped", id, ok, len(got.Spans), got.Dropped)
		}
	}
	if n := r.Count(telemetry.TraceFilter{Observer: "o"}); n != 2 {
		t.Errorf("Count of the traces kept of observer o = %d, want 2", n)
	}
	if n, limit := r.Kept(); n != 2 || limit != 2 {
		t.Errorf("Kept() = %d of %d, want 2 of 2", n, limit)
	}
	if _, err := telemetry.NewRecent(&telemetry.RecentOptions{Sample: 2}); err == nil {
		t.Errorf("a sample of 2 was accepted")
	}
}

// Rule: when full, Recent drops the oldest trace of the observer that
// holds the most, so that a busy pipeline's chains do not push a quiet
// one's out of the page.
func TestRecentKeepsAQuietObserversChains(t *testing.T) {
	tr, r := recording(t, &telemetry.RecentOptions{Traces: 4})
	quiet := chain(tr, "quiet", "q1", time.Millisecond, nil)
	var busy []string
	for i := range 10 {
		busy = append(busy, chain(tr, "busy", "b"+string(rune('0'+i)), time.Millisecond, nil))
	}
	if _, ok := r.Get(quiet); !ok {
		t.Errorf("the quiet observer's only trace was pushed out by 10 of the busy one's")
	}
	for _, id := range busy[len(busy)-3:] {
		if _, ok := r.Get(id); !ok {
			t.Errorf("one of the busy observer's 3 newest traces is not kept")
		}
	}
	if n := r.Count(telemetry.TraceFilter{Observer: "busy"}); n != 3 {
		t.Errorf("kept %d of the busy observer's traces, want 3 (the bound of 4 less the quiet one's)", n)
	}
}
