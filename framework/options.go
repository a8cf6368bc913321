package framework

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Oracle is where transactions draw their start and commit timestamps:
// strictly increasing, each allocated after the call began. Package
// oracle has one in process (Server) and a client that shares
// one over the network (Client).
type Oracle interface {
	Timestamp(ctx context.Context) (uint64, error)
}

// Options configure Open. The zero value is usable: EnsureDefaults fills
// every field left unset.
type Options struct {
	// Observers, if set, are observed columns this process knows of itself
	// (a runner's registry, or a writer that knows which pipeline it feeds):
	// they are notified whether or not a runner has published them yet.
	// Default: nil — the columns the runners published in the store only.
	Observers *Registry
	// LockTTL is how long a lock of a transaction whose owner stopped
	// refreshing it lasts before others roll it back. Default: 20s.
	LockTTL time.Duration
	// MaxAttempts bounds how many times Update runs its function when
	// commits conflict. Default: 0, meaning until the context ends.
	MaxAttempts int
	// RetryBackoffMin and RetryBackoffMax bound Update's backoff between
	// attempts (exponential, with jitter). Defaults: 1ms and 250ms.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// Logger receives diagnostics. Default: slog.Default().
	Logger *slog.Logger
	// TracerProvider makes the spans of transactions. Default: the global
	// provider (a no-op unless the program installed one).
	TracerProvider trace.TracerProvider
	// MeterProvider receives the transaction metrics. Default: the global
	// provider.
	MeterProvider metric.MeterProvider
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.LockTTL == 0 {
		o.LockTTL = 20 * time.Second
	}
	if o.RetryBackoffMin == 0 {
		o.RetryBackoffMin = time.Millisecond
	}
	if o.RetryBackoffMax == 0 {
		o.RetryBackoffMax = 250 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.TracerProvider == nil {
		o.TracerProvider = otel.GetTracerProvider()
	}
	if o.MeterProvider == nil {
		o.MeterProvider = otel.GetMeterProvider()
	}
	return o
}

// Validate reports the first unusable field, wrapping ErrInvalidOptions.
func (o *Options) Validate() error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidOptions, field, why) }
	switch {
	case o.LockTTL < time.Millisecond:
		return bad("LockTTL", "must be at least 1ms")
	case o.MaxAttempts < 0:
		return bad("MaxAttempts", "must not be negative")
	case o.RetryBackoffMin <= 0 || o.RetryBackoffMax < o.RetryBackoffMin:
		return bad("RetryBackoffMin/Max", "must be positive with Min <= Max")
	}
	return nil
}
