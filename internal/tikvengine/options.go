package tikvengine

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/store"
)

// Defaults of Options.
const (
	// DefaultNamespace differs from store/tikv's (tikv.DefaultNamespace,
	// "trickle"), so that this engine's transactional data and the layered
	// store it keeps its bookkeeping in share a cluster.
	DefaultNamespace       = "trickle-txn"
	DefaultRequestTimeout  = 30 * time.Second
	DefaultRetryBackoffMin = time.Millisecond
	DefaultRetryBackoffMax = 250 * time.Millisecond
	DefaultScanBatchSize   = 256
	// DefaultLockCheckInterval is Options.LockCheckInterval's default.
	DefaultLockCheckInterval = time.Second
)

// ObservedSet tells the engine which columns carry notifications (see
// engine.ObservedSet).
type ObservedSet = engine.ObservedSet

// Options configure New. The zero value (or nil) is usable but for Store:
// EnsureDefaults fills in every other unset field, and each field
// documents its default.
type Options struct {
	// Namespace separates this engine's keys from every other user of the
	// cluster: every key starts with it and a 0x00 byte. It must not
	// contain a 0x00 byte. Default: DefaultNamespace.
	Namespace string

	// Observed tells commits which columns carry notifications. Default:
	// nil, no column is observed (no notification is written and
	// NotifyWeak is refused).
	Observed ObservedSet

	// Store is where the framework keeps what is not transactional data
	// (failure records, published observers, backfill progress):
	// Engine.Store returns it. Callers pass the layered store/tikv Store
	// on the same cluster. Required.
	Store store.Store

	// Guards and DeclaredGuards enforce the guard rule (see
	// engine.GuardSet): a commit that writes a guarded cell without its
	// guard, or a cell of a declared guarded family whose guard Guards
	// does not know, fails with engine.ErrUnguarded. Default: nil, none.
	Guards         engine.GuardSet
	DeclaredGuards engine.GuardedFamilies

	// Lease, if set, protects what transactions read: a transaction
	// begins only while it holds and fails with engine.ErrSnapshotTooOld
	// and engine.ErrLeaseLost if it lapsed since (a collection that no
	// longer counted this process may have passed it), checked after
	// every read and once more after the prewrites, before the commit
	// point; that makes every commit two-phase (see DisableAsyncCommit).
	// A runner always sets it. Default: nil.
	Lease engine.Lease

	// Notified, if set, is called after a commit that left notifications
	// (and after a standalone NotifyWeak) with the rows it notified, each
	// once with its columns; nil past engine.MaxNotifiedRows. A runner
	// uses it to have its scanners, and other processes' over NATS, look
	// at those rows at once. It must not block or keep the rows.
	// Default: nil.
	Notified func(rows []engine.NotifiedRow)

	// WorkerID names this process to the observer runtime. Default: a
	// random UUID.
	WorkerID string

	// Logger receives diagnostics. Default: slog.Default().
	Logger *slog.Logger
	// TracerProvider makes the spans of transactions. Default: the global
	// provider (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// MeterProvider is handed to the observer runtime through Setup.
	// Default: the global provider (otel.GetMeterProvider).
	MeterProvider metric.MeterProvider

	// MaxAttempts bounds the attempts Transact makes at a read-write
	// transaction that conflicts (or whose snapshot a garbage collection
	// passed) before returning the last error. Default: 0, retry until the
	// context ends, as the engine over a store does.
	MaxAttempts int
	// RetryBackoffMin and RetryBackoffMax bound the randomized exponential
	// backoff between those attempts. Defaults: DefaultRetryBackoffMin and
	// DefaultRetryBackoffMax.
	RetryBackoffMin, RetryBackoffMax time.Duration

	// Barrier, if set, is the process's GC barrier (see NewBarrier), which
	// the DB's transactions register with so that no collection on the
	// cluster passes them, whoever runs it; a transaction fails with
	// engine.ErrSnapshotTooOld once the barrier is no longer surely held.
	// Several DBs of a process share one. Without one, only collections
	// that count this process's transactions by other means (a runner
	// fleet's, from its workers' reports) keep them: never share a
	// cluster that way. Default: none.
	Barrier *Barrier

	// RequestTimeout bounds what the engine asks of the cluster on its
	// own behalf (a PD timestamp, reading a notification's versions, the
	// safe point) when the caller's context has no earlier deadline, so
	// that an unreachable cluster ends in an error rather than a hang. It
	// does not bound a transaction, which may run as long as its function
	// does: the transaction's reads and commit end with the caller's
	// context or client-go's own backoff budgets.
	// Default: DefaultRequestTimeout.
	RequestTimeout time.Duration

	// ScanBatchSize is how many keys a scan fetches per TiKV request.
	// Default: DefaultScanBatchSize.
	ScanBatchSize int

	// LockCheckInterval is how often Find also checks a table's locked
	// notifications (one ScanLock request per region of the range),
	// resolving those older than their TTL and yielding every one as a
	// cell that may have work; a DB's first Find of a table checks. Find
	// otherwise reads at read-committed, which never sees a lock, so a
	// committed write whose notification is still a lock (its secondary
	// commit late or lost, or async commit) is found within its lock's
	// TTL plus this interval. Default: DefaultLockCheckInterval.
	LockCheckInterval time.Duration

	// DisableAsyncCommit and Disable1PC turn off TiKV's async commit and
	// one-phase commit, which are on by default: a transaction whose keys
	// are all in one region commits in a single prewrite (1PC), and any
	// other (up to client-go's async-commit key limits) is committed once
	// its prewrites succeed, its commit timestamp computed by TiKV, so its
	// caller waits for one round of writes instead of two. Both keep
	// linearizability: the engine never sets client-go's causal
	// consistency, so client-go draws a PD timestamp before prewriting as
	// the least commit timestamp, and a transaction that begins after
	// another committed (in real time) always has the later commit
	// timestamp. That costs the same PD timestamp a two-phase commit
	// draws for its commit timestamp, and keeps safe the rules that
	// compare a commit timestamp with a later run's start timestamp
	// (Claim, Settle). A cluster that does not support them (TiKV before
	// 5.0, or client-go's mock) falls back to two phases by itself.
	// With a Lease, neither is used: the lease must be checked between
	// the prewrites and the commit point, which both of them skip (TiKV
	// does not compare a prewrite with the GC safe point, so a process
	// paused before its prewrites left would otherwise commit after a
	// collection passed it). Default: false (both enabled without a
	// Lease).
	DisableAsyncCommit, Disable1PC bool
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.WorkerID == "" {
		o.WorkerID = uuid.NewString()
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
	if o.RetryBackoffMin == 0 {
		o.RetryBackoffMin = DefaultRetryBackoffMin
	}
	if o.RetryBackoffMax == 0 {
		o.RetryBackoffMax = DefaultRetryBackoffMax
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.ScanBatchSize == 0 {
		o.ScanBatchSize = DefaultScanBatchSize
	}
	if o.LockCheckInterval == 0 {
		o.LockCheckInterval = DefaultLockCheckInterval
	}
	return o
}

// Validate reports the first unusable field, wrapping
// engine.ErrInvalidOptions. Call it after EnsureDefaults (New does both).
func (o *Options) Validate() error {
	bad := func(field, why string) error {
		return fmt.Errorf("%w: tikvengine: %s %s", engine.ErrInvalidOptions, field, why)
	}
	switch {
	case o.Namespace == "":
		return bad("Namespace", "is empty")
	case strings.IndexByte(o.Namespace, 0) >= 0:
		return bad("Namespace", fmt.Sprintf("%q contains a 0x00 byte", o.Namespace))
	case o.Store == nil:
		return bad("Store", "is required (the framework's bookkeeping)")
	case o.Logger == nil || o.TracerProvider == nil || o.MeterProvider == nil:
		return bad("Logger, TracerProvider and MeterProvider", "must be set")
	case o.MaxAttempts < 0:
		return bad("MaxAttempts", "must not be negative")
	case o.RetryBackoffMin <= 0 || o.RetryBackoffMax < o.RetryBackoffMin:
		return bad("RetryBackoffMin/Max", "must be positive with Min <= Max")
	case o.RequestTimeout <= 0:
		return bad("RequestTimeout", "must be positive")
	case o.ScanBatchSize < 1:
		return bad("ScanBatchSize", "must be at least 1")
	case o.LockCheckInterval < 0:
		return bad("LockCheckInterval", "must not be negative")
	}
	return nil
}
