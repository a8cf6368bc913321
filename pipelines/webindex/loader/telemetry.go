package loader

import (
	"context"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const instrumentationName = "github.com/trickle-dev/trickle/pipelines/webindex/loader"

// registerMetrics exports trickle.loader.pages, the pages written by
// result (added, replaced, unchanged, deleted, failed, bad): its rate is
// the loader's pages per second.
func (l *Loader) registerMetrics(mp metric.MeterProvider) error {
	m := mp.Meter(instrumentationName)
	pages, err := m.Int64ObservableCounter("trickle.loader.pages", metric.WithUnit("{page}"),
		metric.WithDescription("Pages the loader wrote, by result: added, replaced, unchanged, deleted, failed, bad."))
	if err != nil {
		return err
	}
	result := func(r string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("result", r)))
	}
	added, replaced, unchanged, deleted, failed, bad := result("added"), result("replaced"), result("unchanged"), result("deleted"), result("failed"), result("bad")
	wp := weak.Make(l)
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		l := wp.Value()
		if l == nil {
			return nil
		}
		o.ObserveInt64(pages, l.c.loaded.Load(), added)
		o.ObserveInt64(pages, l.c.replaced.Load(), replaced)
		o.ObserveInt64(pages, l.c.unchanged.Load(), unchanged)
		o.ObserveInt64(pages, l.c.deleted.Load(), deleted)
		o.ObserveInt64(pages, l.c.failed.Load(), failed)
		o.ObserveInt64(pages, l.c.bad.Load(), bad)
		return nil
	}, pages)
	return err
}
