package scanner

import (
	"context"
	"errors"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const instrumentationName = "github.com/trickle-dev/trickle/scanner"

// registerMetrics exports the scanner's counters (Stats) and gauges as
// observable instruments:
//
//	trickle.scanner.notifications.found       notifications seen by scans
//	trickle.scanner.notifications.dispatched  handed to the worker pool
//	trickle.scanner.notifications.pending     found by the latest full pass, per table
//	trickle.scanner.notifications.inflight    being processed now
//	trickle.scanner.notifications.retrying    failed, waiting for a retry
//	trickle.scanner.jumps                     anti-clumping jumps
//	trickle.scanner.rowlock.contended         rows another holder had locked
//	trickle.scanner.passes                    scans that went all the way round
//	trickle.scanner.hinted                    rows looked at because a commit named them
//	trickle.scanner.hints.dropped             hints dropped for a full queue (a pass instead)
//	trickle.scanner.hints.held                hinted rows found busy, looked at again later
//	trickle.scanner.notifications.unhinted    handed out by passes on rows no hint named
//	trickle.scanner.notifications.named       run as hints named them, without a look at the row
//
// The callback holds the scanner weakly, so a global meter provider does
// not keep finished scanners alive.
func (s *Scanner) registerMetrics() error {
	m := s.opts.MeterProvider.Meter(instrumentationName)
	var errs []error
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	found := counter("trickle.scanner.notifications.found", "{notification}", "Notifications seen by scans (a notification is seen on every pass until processed).")
	dispatched := counter("trickle.scanner.notifications.dispatched", "{notification}", "Notifications handed to the worker pool.")
	jumps := counter("trickle.scanner.jumps", "{jump}", "Anti-clumping jumps: a scanner caught up with another and moved to a random position.")
	contended := counter("trickle.scanner.rowlock.contended", "{row}", "Rows whose advisory lock another scanner held.")
	passes := counter("trickle.scanner.passes", "{pass}", "Scans that went all the way round a table.")
	hinted := counter("trickle.scanner.hinted", "{row}", "Rows looked at because a commit named them (Hint), without a pass.")
	hintsDropped := counter("trickle.scanner.hints.dropped", "{call}", "Hints dropped because the queue of hinted rows was full; a pass was made instead.")
	held := counter("trickle.scanner.hints.held", "{row}", "Looks at hinted rows that found them busy (in flight here, or locked by another); looked at again when released.")
	unhinted := counter("trickle.scanner.notifications.unhinted", "{notification}", "Notifications passes handed out on rows no hint named, still pending when run: work only a pass finds.")
	named := counter("trickle.scanner.notifications.named", "{notification}", "Notifications handed out as a hint named them (row and column), without reading the row's notifications first.")
	pending := gauge("trickle.scanner.notifications.pending", "{notification}", "Notifications the latest full pass over a table found: the backlog.")
	inflight := gauge("trickle.scanner.notifications.inflight", "{notification}", "Notifications being processed.")
	retrying := gauge("trickle.scanner.notifications.retrying", "{notification}", "Notifications whose observer failed, waiting out their retry backoff.")
	if err := errors.Join(errs...); err != nil {
		return err
	}
	wp := weak.Make(s)
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := wp.Value()
		if s == nil {
			return nil
		}
		st := &s.stats
		o.ObserveInt64(found, int64(st.Found.Load()))
		o.ObserveInt64(dispatched, int64(st.Dispatched.Load()))
		o.ObserveInt64(jumps, int64(st.Jumps.Load()))
		o.ObserveInt64(contended, int64(st.Contended.Load()))
		o.ObserveInt64(passes, int64(st.Passes.Load()))
		o.ObserveInt64(hinted, int64(st.Hinted.Load()))
		o.ObserveInt64(hintsDropped, int64(st.HintsDropped.Load()))
		o.ObserveInt64(held, int64(st.Held.Load()))
		o.ObserveInt64(unhinted, int64(st.Unhinted.Load()))
		o.ObserveInt64(named, int64(st.Named.Load()))
		s.mu.Lock()
		nInflight, nRetry := len(s.inflight), len(s.retry)
		type tablePending struct {
			table string
			n     int
		}
		var ps []tablePending
		for t, n := range s.lastPass {
			ps = append(ps, tablePending{t, n})
		}
		s.mu.Unlock()
		o.ObserveInt64(inflight, int64(nInflight))
		o.ObserveInt64(retrying, int64(nRetry))
		for _, p := range ps {
			o.ObserveInt64(pending, int64(p.n), metric.WithAttributes(attribute.String("trickle.table", p.table)))
		}
		return nil
	}, found, dispatched, jumps, contended, passes, hinted, hintsDropped, held, unhinted, named, pending, inflight, retrying)
	return err
}
