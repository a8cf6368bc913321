package percolator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/internal/engine"
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
const instrumentationName = engine.InstrumentationName

// Attribute keys on the framework's spans and metrics.
const (
	attrStartTs   = attribute.Key("trickle.txn.start_ts")
	attrCommitTs  = attribute.Key("trickle.txn.commit_ts")
	attrWrites    = attribute.Key("trickle.txn.writes")
	attrAttempt   = attribute.Key("trickle.txn.attempt")
	attrTxnResult = attribute.Key("trickle.txn.outcome")
	attrPrimary   = attribute.Key("trickle.txn.primary")
	attrReadOnly  = attribute.Key("trickle.txn.read_only")
	attrOutcome   = attribute.Key("trickle.outcome")
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
