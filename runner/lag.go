package runner

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/store"
)

// The observers' lag is measured by reading every pending notification
// (admin.Lag), which costs as much as the backlog is long; a runner
// measures it when its metrics are collected, at most every
// minLagInterval and never more often than every lagCostFactor times
// the last measurement took, so that a deep backlog is not read over and
// over.
const (
	minLagInterval = 5 * time.Second
	lagCostFactor  = 10
	lagTimeout     = 30 * time.Second
)

// lagSampler measures the observers' lag and keeps the last measurement.
type lagSampler struct {
	st  store.Store
	log *slog.Logger

	mu   sync.Mutex
	last []admin.ObserverLag
	at   time.Time     // when last was taken
	took time.Duration // how long taking it took
}

// sample returns a measurement of the observers' lag no older than the
// intervals above allow.
func (s *lagSampler) sample(ctx context.Context) ([]admin.ObserverLag, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && time.Since(s.at) < max(minLagInterval, lagCostFactor*s.took) {
		return s.last, s.at
	}
	ctx, cancel := context.WithTimeout(ctx, lagTimeout)
	defer cancel()
	began := time.Now()
	ls, err := admin.Lag(ctx, s.st)
	s.took, s.at = time.Since(began), time.Now()
	if err != nil {
		s.log.Debug("measuring the observers' lag", "err", err)
		return s.last, s.at
	}
	s.last = ls
	return ls, s.at
}

// registerLagMetrics exports the gauges trickle.observer.lag (seconds
// since the oldest write an observer has not run for, 0 when none) and
// trickle.observer.pending (cells whose notification waits for it), per
// observer. They describe the whole deployment: every runner reports the
// same.
func registerLagMetrics(mp metric.MeterProvider, s *lagSampler) error {
	m := mp.Meter(instrumentationName)
	lag, err1 := m.Float64ObservableGauge("trickle.observer.lag", metric.WithUnit("s"),
		metric.WithDescription("Age of the oldest write an observer has not run for yet (0 when it is up to date), deployment-wide."))
	pending, err2 := m.Int64ObservableGauge("trickle.observer.pending", metric.WithUnit("{notification}"),
		metric.WithDescription("Cells whose notification waits for the observer, deployment-wide."))
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	_, err := m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ls, at := s.sample(ctx)
		for _, l := range ls {
			if l.Observer == "" {
				continue
			}
			a := metric.WithAttributeSet(attribute.NewSet(attribute.String("trickle.observer", l.Observer)))
			o.ObserveFloat64(lag, l.Age(at).Seconds(), a)
			o.ObserveInt64(pending, int64(l.Pending), a)
		}
		return nil
	}, lag, pending)
	return err
}
