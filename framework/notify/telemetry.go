package notify

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/engine"
)

// Every observer run is a span ("observer NAME"). The trace context of the
// transaction that wrote an observed column travels in the notification it
// left, so the run continues the writer's trace: its parent is the newest
// writer's span and it links to every writer whose notification it settles
// (message collapsing).

// Attribute keys on observer run spans and metrics.
const (
	attrObserver  = attribute.Key("trickle.observer")
	attrTable     = attribute.Key("trickle.table")
	attrRow       = attribute.Key("trickle.row")
	attrColumn    = attribute.Key("trickle.column")
	attrOutcome   = attribute.Key("trickle.outcome")
	attrAttempts  = attribute.Key("trickle.attempts")
	attrConflicts = attribute.Key("trickle.conflicts")
	attrNotified  = attribute.Key("trickle.notifications")
	attrWriters   = attribute.Key("trickle.writers")
	attrNotifyTs  = attribute.Key("trickle.notify.ts")
)

// rowString renders a row key as a span attribute (attributes must be UTF-8).
func rowString(row []byte) string {
	if utf8.Valid(row) {
		return string(row)
	}
	return strconv.QuoteToASCII(string(row))
}

// parseTraceParent decodes the W3C traceparent a notification carries into
// a remote span context; it returns an invalid one for anything else.
func parseTraceParent(b []byte) trace.SpanContext {
	if len(b) == 0 {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": string(b)})
	return trace.SpanContextFromContext(ctx)
}

// SpanContextOf returns the span context of the observer run that failed
// with err (an error from Processor.Process), for logging it with the
// trace it belongs to; it is invalid if err carries none.
func SpanContextOf(err error) trace.SpanContext {
	var re *runError
	if errors.As(err, &re) {
		return re.sc
	}
	return trace.SpanContext{}
}

// runError carries a failed observer run's span context beside its error.
type runError struct {
	err error
	sc  trace.SpanContext
}

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// metrics are the per-observer instruments of a Processor.
type metrics struct {
	runs     metric.Int64Counter
	failures metric.Int64Counter
	duration metric.Float64Histogram
	// attrs[name][outcome] is the attribute set of an observer's runs with
	// that outcome; the extra last outcome is a failure. Built once: the
	// registry is frozen.
	attrs map[string]*[outcomeFailed + 1]metric.MeasurementOption
}

// outcomeFailed indexes metrics.attrs for failed runs.
const outcomeFailed = OutcomeUnobserved + 1

func outcomeName(o Outcome) string {
	if o == outcomeFailed {
		return "failed"
	}
	return o.String()
}

// newMetrics registers p's instruments on mp, falling back to no-op ones
// (with a warning) if that fails.
func newMetrics(mp metric.MeterProvider, worker string, reg *framework.Registry, p *Processor, log *slog.Logger) *metrics {
	m, err := registerMetrics(mp, worker, reg, p)
	if err != nil {
		log.Warn("observer metrics unavailable", "err", err)
		m, _ = registerMetrics(noopmetric.NewMeterProvider(), worker, reg, p)
	}
	return m
}

func registerMetrics(mp metric.MeterProvider, worker string, reg *framework.Registry, p *Processor) (*metrics, error) {
	m := mp.Meter(engine.InstrumentationName)
	wm := &metrics{attrs: map[string]*[outcomeFailed + 1]metric.MeasurementOption{}}
	var err1, err2, err3, err4 error
	wm.runs, err1 = m.Int64Counter("trickle.observer.runs", metric.WithUnit("{run}"),
		metric.WithDescription("Notifications processed, by observer and outcome (ran, skipped, unobserved, failed)."))
	wm.failures, err2 = m.Int64Counter("trickle.observer.failures", metric.WithUnit("{run}"),
		metric.WithDescription("Observer runs that returned an error (the notification stays and is retried)."))
	wm.duration, err3 = m.Float64Histogram("trickle.observer.duration", metric.WithUnit("s"),
		metric.WithDescription("Time to process a notification: the observer's transaction, its retries and the cleanup of settled notifications."))
	collapsed, err4 := m.Int64ObservableCounter("trickle.observer.collapsed", metric.WithUnit("{notification}"),
		metric.WithDescription("Extra notifications settled by a run that several writes triggered (message collapsing)."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return nil, err
	}
	for _, o := range append(reg.Observers(), framework.Observer{Name: ""}) {
		var a [outcomeFailed + 1]metric.MeasurementOption
		for out := OutcomeNone; out <= outcomeFailed; out++ {
			a[out] = metric.WithAttributeSet(attribute.NewSet(attrObserver.String(o.Name), attribute.String("outcome", outcomeName(out))))
		}
		wm.attrs[o.Name] = &a
	}
	workerAttr := metric.WithAttributes(attribute.String("trickle.worker", worker))
	wp := weak.Make(p)
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if p := wp.Value(); p != nil {
			o.ObserveInt64(collapsed, int64(p.stats.Collapsed.Load()), workerAttr)
		}
		return nil
	}, collapsed)
	return wm, err
}

// record counts one processed notification.
func (wm *metrics) record(ctx context.Context, observer string, out Outcome, failed bool, d time.Duration) {
	a, ok := wm.attrs[observer]
	if !ok {
		a = wm.attrs[""]
	}
	if failed {
		out = outcomeFailed
		wm.failures.Add(ctx, 1, a[out])
	}
	wm.runs.Add(ctx, 1, a[out])
	wm.duration.Record(ctx, d.Seconds(), a[out])
}

// startRun starts the span of an observer run for the notification
// versions it found. Its parent is the newest writer that left a trace
// context; it links to every writer that did (including that one), each
// link tagged with the notification's version.
func (p *Processor) startRun(ctx context.Context, obs *framework.Observer, n Notification, pending *engine.Pending) (context.Context, trace.Span) {
	var links []trace.Link
	var parent trace.SpanContext
	for i, tp := range pending.Traces { // newest first
		sc := parseTraceParent(tp)
		if !sc.IsValid() {
			continue
		}
		if !parent.IsValid() {
			parent = sc
		}
		links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attrNotifyTs.Int64(int64(pending.Versions[i]))}})
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, span := p.tracer.Start(ctx, "observer "+obs.Name, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...))
	if span.IsRecording() {
		span.SetAttributes(
			attrObserver.String(obs.Name),
			attrTable.String(n.Table),
			attrRow.String(rowString(n.Row)),
			attrColumn.String(n.Column.String()),
			attrNotified.Int(len(pending.Versions)),
			attrWriters.Int(len(links)),
		)
	}
	return ctx, span
}

// endRun ends an observer run's span.
func endRun(span trace.Span, out Outcome, attempts int, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	o := out.String()
	if err != nil {
		o = "failed"
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(attrOutcome.String(o), attrAttempts.Int(attempts), attrConflicts.Int(max(attempts-1, 0)))
	span.End()
}
