package framework

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/store"
)

// Telemetry. Every transaction is a span ("txn"), every observer run a span
// ("observer NAME") and every lock resolution a span ("resolve lock"). The
// trace context of a transaction that writes an observed column travels in
// the notification it leaves (protocol.NotifyValue), so the observer run it
// triggers continues the writer's trace: its parent is the newest writer's
// span and it links to every writer whose notification it settles (message
// collapsing). With the default (global, no-op) providers nothing is
// recorded and notifications carry no trace context.
//
// The protocol code (internal/protocol) knows nothing of this: it stores
// the trace context as opaque bytes.

// instrumentationName names the framework's tracer and meter.
const instrumentationName = "github.com/trickle-dev/trickle/framework"

// Attribute keys on the framework's spans and metrics.
const (
	attrStartTs   = attribute.Key("trickle.txn.start_ts")
	attrCommitTs  = attribute.Key("trickle.txn.commit_ts")
	attrWrites    = attribute.Key("trickle.txn.writes")
	attrAttempt   = attribute.Key("trickle.txn.attempt")
	attrTxnResult = attribute.Key("trickle.txn.outcome")
	attrPrimary   = attribute.Key("trickle.txn.primary")
	attrReadOnly  = attribute.Key("trickle.txn.read_only")
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
	attrLockTs    = attribute.Key("trickle.lock.start_ts")
	attrHolder    = attribute.Key("trickle.lock.holder")
	attrKey       = attribute.Key("trickle.key")
)

// Transaction outcomes recorded on "txn" spans.
const (
	txnCommitted  = "committed"
	txnConflict   = "conflict"
	txnAborted    = "aborted"
	txnReadOnly   = "read_only"
	txnCrashed    = "crashed"
	txnRolledBack = "rolled_back"
)

// Lock resolution outcomes, on "resolve lock" spans and in the
// trickle.lock.resolutions metric.
const (
	resolveWaited         = "waited"
	resolveRolledForward  = "rolled_forward"
	resolveRolledBack     = "rolled_back"
	resolvePrimaryAborted = "primary_aborted"
	resolveRetry          = "committed_meanwhile"
)

// rowString renders a row key as a span attribute (attributes must be UTF-8).
func rowString(row []byte) string {
	if utf8.Valid(row) {
		return string(row)
	}
	return strconv.QuoteToASCII(string(row))
}

// traceParent returns the W3C traceparent of a span context, or nil if it
// is not valid (no tracing). Unsampled contexts are kept too, so that a
// chain sampled out at its start stays sampled out all along.
func traceParent(sc trace.SpanContext) []byte {
	if !sc.IsValid() {
		return nil
	}
	return fmt.Appendf(make([]byte, 0, 55), "00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// parseTraceParent decodes what traceParent encoded into a remote span
// context; it returns an invalid one for anything else.
func parseTraceParent(b []byte) trace.SpanContext {
	if len(b) == 0 {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": string(b)})
	return trace.SpanContextFromContext(ctx)
}

// SpanContextOf returns the span context of the observer run that failed
// with err (an error from Worker.Process), for logging it with the trace it
// belongs to; it is invalid if err carries none.
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

// dbMetrics registers the DB's observable counters. The callbacks hold the
// DB weakly, so a DB nobody uses any more is collected even though a global
// meter provider keeps its callbacks.
func (db *DB) registerMetrics() error {
	m := db.opts.MeterProvider.Meter(instrumentationName)
	committed, err1 := m.Int64ObservableCounter("trickle.txn.committed", metric.WithUnit("{transaction}"),
		metric.WithDescription("Transactions that reached their commit point."))
	conflicts, err2 := m.Int64ObservableCounter("trickle.txn.conflicts", metric.WithUnit("{transaction}"),
		metric.WithDescription("Commits that failed with a conflict (Update retries them)."))
	aborted, err3 := m.Int64ObservableCounter("trickle.txn.aborted", metric.WithUnit("{transaction}"),
		metric.WithDescription("Read-write transactions that ended without committing for another reason than a conflict: the function failed, Rollback, or the commit failed."))
	resolutions, err4 := m.Int64ObservableCounter("trickle.lock.resolutions", metric.WithUnit("{resolution}"),
		metric.WithDescription("Locks met by readers and committers, by outcome: waited (owner alive), rolled_forward, rolled_back, primary_aborted."))
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	worker := attribute.String("trickle.worker", db.opts.WorkerID)
	base := metric.WithAttributes(worker)
	outcomeOpts := func(outcome string) metric.ObserveOption {
		return metric.WithAttributes(worker, attribute.String("outcome", outcome))
	}
	waited, forward, back, primary := outcomeOpts(resolveWaited), outcomeOpts(resolveRolledForward), outcomeOpts(resolveRolledBack), outcomeOpts(resolvePrimaryAborted)
	wp := weak.Make(db)
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		db := wp.Value()
		if db == nil {
			return nil
		}
		s := &db.stats
		o.ObserveInt64(committed, int64(s.Committed.Load()), base)
		o.ObserveInt64(conflicts, int64(s.Conflicts.Load()), base)
		o.ObserveInt64(aborted, int64(s.Aborted.Load()), base)
		o.ObserveInt64(resolutions, int64(s.LockWaits.Load()), waited)
		o.ObserveInt64(resolutions, int64(s.RolledForward.Load()), forward)
		// PrimaryAborted primaries are also counted in RolledBack.
		o.ObserveInt64(resolutions, int64(s.RolledBack.Load()-s.PrimaryAborted.Load()), back)
		o.ObserveInt64(resolutions, int64(s.PrimaryAborted.Load()), primary)
		return nil
	}, committed, conflicts, aborted, resolutions)
	return err
}

// workerMetrics are the per-observer instruments of a Worker.
type workerMetrics struct {
	runs     metric.Int64Counter
	failures metric.Int64Counter
	duration metric.Float64Histogram
	// attrs[name][outcome] is the attribute set of an observer's runs with
	// that outcome; the extra last outcome is a failure. Built once: the
	// registry is frozen.
	attrs map[string]*[outcomeFailed + 1]metric.MeasurementOption
}

// outcomeFailed indexes workerMetrics.attrs for failed runs.
const outcomeFailed = OutcomeUnobserved + 1

func outcomeName(o Outcome) string {
	if o == outcomeFailed {
		return "failed"
	}
	return o.String()
}

func newWorkerMetrics(db *DB, w *Worker) (*workerMetrics, error) {
	m := db.opts.MeterProvider.Meter(instrumentationName)
	wm := &workerMetrics{attrs: map[string]*[outcomeFailed + 1]metric.MeasurementOption{}}
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
	for _, o := range append(w.reg.Observers(), Observer{Name: ""}) {
		var a [outcomeFailed + 1]metric.MeasurementOption
		for out := OutcomeNone; out <= outcomeFailed; out++ {
			a[out] = metric.WithAttributeSet(attribute.NewSet(attrObserver.String(o.Name), attribute.String("outcome", outcomeName(out))))
		}
		wm.attrs[o.Name] = &a
	}
	worker := metric.WithAttributes(attribute.String("trickle.worker", db.opts.WorkerID))
	wp := weak.Make(w)
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		if w := wp.Value(); w != nil {
			o.ObserveInt64(collapsed, int64(w.stats.Collapsed.Load()), worker)
		}
		return nil
	}, collapsed)
	return wm, err
}

// record counts one processed notification.
func (wm *workerMetrics) record(ctx context.Context, observer string, out Outcome, failed bool, d time.Duration) {
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
func (w *Worker) startRun(ctx context.Context, obs *Observer, n Notification, writers [][]byte, versions []store.Cell) (context.Context, trace.Span) {
	var links []trace.Link
	var parent trace.SpanContext
	for i, tp := range writers { // newest first, as the store returns them
		sc := parseTraceParent(tp)
		if !sc.IsValid() {
			continue
		}
		if !parent.IsValid() {
			parent = sc
		}
		links = append(links, trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attrNotifyTs.Int64(int64(versions[i].Ts))}})
	}
	if parent.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, span := w.db.tracer.Start(ctx, "observer "+obs.Name, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...))
	if span.IsRecording() {
		span.SetAttributes(
			attrObserver.String(obs.Name),
			attrTable.String(n.Table),
			attrRow.String(rowString(n.Row)),
			attrColumn.String(n.Column.String()),
			attrNotified.Int(len(versions)),
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
