package runner

import (
	"context"
	"errors"
	"time"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/trickle-dev/trickle/oracle"
)

const instrumentationName = "github.com/trickle-dev/trickle/runner"

// timedReserver measures the timestamp batches a process draws from the
// oracle: their size and how long each took (a round trip, for a remote
// oracle).
type timedReserver struct {
	r        oracle.Reserver
	size     metric.Int64Histogram
	duration metric.Float64Histogram
	errors   metric.Int64Counter
	attrs    metric.MeasurementOption
}

func newTimedReserver(mp metric.MeterProvider, r oracle.Reserver, where string) (*timedReserver, error) {
	m := mp.Meter(instrumentationName)
	size, err1 := m.Int64Histogram("trickle.oracle.batch.size", metric.WithUnit("{timestamp}"),
		metric.WithDescription("Timestamps drawn from the oracle per call (concurrent requests coalesce into one call)."),
		metric.WithExplicitBucketBoundaries(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
	duration, err2 := m.Float64Histogram("trickle.oracle.batch.duration", metric.WithUnit("s"),
		metric.WithDescription("Time one call to the oracle took."),
		metric.WithExplicitBucketBoundaries(0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1))
	errs, err3 := m.Int64Counter("trickle.oracle.errors", metric.WithUnit("{call}"),
		metric.WithDescription("Calls to the oracle that failed."))
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	return &timedReserver{r: r, size: size, duration: duration, errors: errs,
		attrs: metric.WithAttributeSet(attribute.NewSet(attribute.String("trickle.oracle", where)))}, nil
}

func (t *timedReserver) Reserve(ctx context.Context, n int) (uint64, error) {
	began := time.Now()
	first, err := t.r.Reserve(ctx, n)
	if err != nil {
		t.errors.Add(ctx, 1, t.attrs)
		return first, err
	}
	t.duration.Record(ctx, time.Since(began).Seconds(), t.attrs)
	t.size.Record(ctx, int64(n), t.attrs)
	return first, nil
}

// Timestamp makes a timedReserver a framework.Oracle.
func (t *timedReserver) Timestamp(ctx context.Context) (uint64, error) { return t.Reserve(ctx, 1) }

// registerRowLockMetrics exports the advisory row locks' counters:
// trickle.rowlocks.tries by result (acquired, contended, error) and
// trickle.rowlocks.releases by result (released, lost), both in the shared
// bucket, and the gauge trickle.rowlocks.shared.
func registerRowLockMetrics(mp metric.MeterProvider, l *rowLocks) error {
	m := mp.Meter(instrumentationName)
	tries, err1 := m.Int64ObservableCounter("trickle.rowlocks.tries", metric.WithUnit("{try}"),
		metric.WithDescription("Attempts to take a row's advisory lock in the shared bucket, by result: acquired, contended (another worker has it), error."))
	releases, err2 := m.Int64ObservableCounter("trickle.rowlocks.releases", metric.WithUnit("{release}"),
		metric.WithDescription("Advisory lock releases in the shared bucket, by result: released, lost (expired or taken over first)."))
	shared, err3 := m.Int64ObservableGauge("trickle.rowlocks.shared",
		metric.WithDescription("1 while row locks are taken in the shared bucket (another runner is live), 0 while this runner is alone and keeps them in process."))
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	result := func(r string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("result", r)))
	}
	acquired, contended, failed, released, lost := result("acquired"), result("contended"), result("error"), result("released"), result("lost")
	wp := weak.Make(l)
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		l := wp.Value()
		if l == nil {
			return nil
		}
		s := l.shared.Stats()
		o.ObserveInt64(tries, int64(s.Acquired), acquired)
		o.ObserveInt64(tries, int64(s.Contended), contended)
		o.ObserveInt64(tries, int64(s.Errors), failed)
		o.ObserveInt64(releases, int64(s.Released), released)
		o.ObserveInt64(releases, int64(s.Lost), lost)
		var v int64
		if !l.alone.Load() {
			v = 1
		}
		o.ObserveInt64(shared, v)
		return nil
	}, tries, releases, shared)
	return err
}
