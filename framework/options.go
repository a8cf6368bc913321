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

// Liveness tells whether the process that holds a lock is alive.
// cluster.Liveness is one, shared by the processes of a deployment.
type Liveness interface {
	// Alive reports whether holder (a WorkerID) is alive. An error is
	// taken as "alive": the lock's TTL still bounds the wait.
	Alive(ctx context.Context, holder string) (bool, error)
}

// Lease is a process's right to keep snapshots a garbage collection must
// not pass: a worker's liveness token (cluster.Liveness is one).
type Lease interface {
	// Held returns the lease's term and whether it holds now. The term
	// changes whenever the lease was lost and taken again: a transaction
	// begun in an earlier term may have been passed.
	Held() (term uint64, ok bool)
}

// NotifiedRow is a row a commit notified.
type NotifiedRow struct {
	Table string
	Row   []byte
	// Columns are the observed columns notified in the row, each once;
	// nil when they are not known (a wake-up from another process names
	// rows only).
	Columns []Column
}

// Options configure Open. The zero value is usable: EnsureDefaults fills
// every field left unset.
type Options struct {
	// Observers, if set, are observed columns this process knows of itself
	// (a runner's registry, or a writer that knows which pipeline it feeds):
	// they are notified whether or not a runner has published them yet.
	// Default: nil — the columns the runners published in the store only.
	Observers *Registry
	// Engine is the transaction engine to run (see Engine): every process
	// of a deployment must run the same one, and Open fails with
	// ErrEngineMismatch when the store's data belongs to another. Set it
	// when the store is not the one whose engine it declares, such as a
	// decorator of a TiKV store without an Unwrap method. Default:
	// EngineDefault, the engine the store declares (EngineTiKV for a
	// store/tikv Store, and for a wrapper that unwraps to one), else
	// EngineProtocol.
	Engine Engine
	// WorkerID names this process's transactions in the locks they hold,
	// so that another process meeting one can ask Liveness whether its
	// owner is still there. Default: a random id.
	WorkerID string
	// Liveness tells whether the owner of a lock is alive, so that a lock
	// of a process that died is rolled back at once rather than when its
	// TTL runs out. Default: nil, every owner presumed alive until its
	// lock's TTL passes.
	Liveness Liveness
	// Lease, if set, protects what transactions read: a transaction reads
	// only while the lease holds, and fails with ErrLeaseLost if it lapsed
	// meanwhile, since a garbage collection that no longer counted this
	// process may have passed its snapshot. Default: nil (no lease; the
	// store's safe point alone protects snapshots).
	Lease Lease
	// Notified, if set, is called after a commit that left notifications,
	// and after a standalone NotifyWeak, with the rows it notified (each
	// once; nil when there were too many to list). Runners use it to have
	// their scanners look at those rows at once instead of at their next
	// pass. It must not block or keep the rows. Default: nil.
	Notified func(rows []NotifiedRow)
	// LockTTL is how long a lock of a transaction whose owner stopped
	// refreshing it lasts before others roll it back. Default: 20s.
	LockTTL time.Duration
	// History is how much history below now the deployment keeps for
	// as-of reads (ViewAt). On a store other users share (TiKV), the
	// process holds it against their collections too. Default: 0, only
	// running transactions are held.
	History time.Duration
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
	case o.Engine != EngineDefault && o.Engine != EngineProtocol && o.Engine != EngineTiKV:
		return bad("Engine", fmt.Sprintf("is %q: want %q, %q or empty (the store's own)", o.Engine, EngineProtocol, EngineTiKV))
	case o.LockTTL < time.Millisecond:
		return bad("LockTTL", "must be at least 1ms")
	case o.MaxAttempts < 0:
		return bad("MaxAttempts", "must not be negative")
	case o.History < 0:
		return bad("History", "must not be negative")
	case o.RetryBackoffMin <= 0 || o.RetryBackoffMax < o.RetryBackoffMin:
		return bad("RetryBackoffMin/Max", "must be positive with Min <= Max")
	}
	return nil
}
