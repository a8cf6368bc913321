package export

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
)

const instrumentationName = "github.com/trickle-dev/trickle/framework/export"

// metrics are a queue's instruments.
type metrics struct {
	entries  metric.Int64Counter
	batches  metric.Int64Counter
	duration metric.Float64Histogram
	ok, fail metric.MeasurementOption
	queue    metric.MeasurementOption
}

// newMetrics registers a queue's instruments on mp, falling back to no-op
// ones (with a warning) if that fails.
func newMetrics(mp metric.MeterProvider, queue string, log *slog.Logger) *metrics {
	m, err := registerMetrics(mp, queue)
	if err != nil {
		log.Warn("export metrics unavailable", "queue", queue, "err", err)
		m, _ = registerMetrics(noopmetric.NewMeterProvider(), queue)
	}
	return m
}

func registerMetrics(mp metric.MeterProvider, queue string) (*metrics, error) {
	meter := mp.Meter(instrumentationName)
	entries, err1 := meter.Int64Counter("trickle.export.entries", metric.WithUnit("{entry}"),
		metric.WithDescription("Entries a queue's sink took (an entry exported again after a failure or a conflict counts again)."))
	batches, err2 := meter.Int64Counter("trickle.export.batches", metric.WithUnit("{batch}"),
		metric.WithDescription("Batches handed to a queue's sink, by outcome: ok, failed (left in the queue and retried)."))
	duration, err3 := meter.Float64Histogram("trickle.export.sink.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a queue's sink took for one batch."))
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	q := attribute.String("trickle.queue", queue)
	return &metrics{entries: entries, batches: batches, duration: duration,
		ok:    metric.WithAttributeSet(attribute.NewSet(q, attribute.String("outcome", "ok"))),
		fail:  metric.WithAttributeSet(attribute.NewSet(q, attribute.String("outcome", "failed"))),
		queue: metric.WithAttributeSet(attribute.NewSet(q)),
	}, nil
}

// batch records one batch of n entries handed to the sink.
func (m *metrics) batch(ctx context.Context, n int, err error, d time.Duration) {
	m.duration.Record(ctx, d.Seconds(), m.queue)
	if err != nil {
		m.batches.Add(ctx, 1, m.fail)
		return
	}
	m.batches.Add(ctx, 1, m.ok)
	m.entries.Add(ctx, int64(n), m.queue)
}
