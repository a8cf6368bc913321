package percolator

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/store"
)

// Oracle is the timestamp source transactions draw start and commit
// timestamps from. It must return strictly increasing timestamps, each
// allocated after the call began (see package oracle, whose Client
// implements it in-process or over the network).
type Oracle interface {
	Timestamp(ctx context.Context) (uint64, error)
}

// Liveness tells whether the worker that holds a lock is still running, so
// that a reader can resolve a dead worker's locks at once instead of waiting
// for their TTL.
type Liveness = engine.Liveness

// Options configure a DB. The zero value is usable: EnsureDefaults fills in
// every field left unset.
type Options struct {
	// WorkerID identifies this process's transactions in the locks they
	// hold, for liveness checks. Default: a random UUID.
	WorkerID string
	// Liveness checks lock holders. Default: nil, which presumes every holder
	// alive and leaves abandoned locks to their TTL.
	Liveness Liveness
	// Lease, if set, is this process's standing with the garbage
	// collector (see Lease): transactions begin only while it holds, and
	// their reads count only while the term they began in holds, so that
	// a process paused past its liveness, which a collection may have
	// passed, never answers from a thinned snapshot. Runners and the DBs
	// of a Node pass their liveness registration. Default: nil — the
	// process's transactions are protected by the collector's own active
	// set (a collection in this process) or by nothing.
	Lease Lease
	// LockTTL is how long after it was last refreshed a lock may be presumed
	// abandoned, measured on the oracle's clock. Default: 20s.
	LockTTL time.Duration
	// HeartbeatInterval is how often a commit in progress refreshes its
	// primary lock. Default: LockTTL/3.
	HeartbeatInterval time.Duration
	// ShortValueMax is the largest value stored inside the lock and commit
	// record rather than in a separate data record; short values are read in
	// one store operation. Default: 256 bytes.
	ShortValueMax int
	// DisableOnePhase makes every transaction commit in two phases. By
	// default a transaction of at most OnePhaseMaxRows rows (those it
	// writes and those it notifies) commits in one phase when its store
	// can write them atomically (store.DB.ApplyAtomic, and a store
	// service over NATS): every cell is written as committed, in
	// one store write at a commit timestamp the store draws, with no lock,
	// no lock delete and no second round. Default: false.
	DisableOnePhase bool
	// CommitConcurrency bounds the parallel prewrites and secondary commits
	// of one transaction. Default: 16.
	CommitConcurrency int
	// OnePhaseMaxRows is the most rows (those it writes and those it
	// notifies) a transaction may have and still commit in one phase; one
	// with more commits in two. A web page's run of the web index writes a
	// row per distinct term and per link target: some hundreds on real
	// pages, which in two phases cost a lock, its check and its removal
	// per cell. Default: store.MaxApplyAll (4096), the most one atomic
	// store write carries.
	OnePhaseMaxRows int
	// RowsPerApply is how many rows' prewrites, or commits, of one
	// transaction go to the store in one ApplyAll: one round trip and one
	// store batch instead of one per row. 1 sends each row on its own (as
	// Percolator did). Default: 256; at most store.MaxApplyAll.
	RowsPerApply int
	// MaxAttempts bounds the attempts Update makes before returning the last
	// conflict. Default: 0, meaning retry until the context ends.
	MaxAttempts int
	// RetryBackoffMin and RetryBackoffMax bound Update's exponential backoff
	// between attempts (with jitter). Defaults: 1ms and 250ms.
	RetryBackoffMin, RetryBackoffMax time.Duration
	// LockWaitMin and LockWaitMax bound the backoff of a read waiting for a
	// live lock. Defaults: 1ms and 100ms.
	LockWaitMin, LockWaitMax time.Duration
	// Observed tells commits which columns carry notifications: a write to
	// a strongly observed column also writes a notify cell. Default: nil (no
	// notifications). Runners pass their Registry; other writers the set
	// published in the store (internal/published).
	Observed ObservedSet
	// Guards tells commits which cells another cell of the same
	// transaction guards (see GuardSet): commits refuse a guarded cell
	// written without its guard, and one-phase commits do not check it.
	// Default: nil (no cell is guarded).
	Guards GuardSet
	// DeclaredGuards tells commits which families the deployment declared
	// guarded (the ones runners published: see internal/published): a commit that
	// writes a cell of one whose guard Guards does not give fails with
	// ErrUnguarded, since it could not write the guard and the one-phase
	// commits of the processes that know it skip the cell's own check.
	// Default: nil (none is declared).
	DeclaredGuards GuardedFamilies
	// Faults, if set, is called at each step of the commit protocol; a
	// non-nil error stops the commit right there as if the process had died
	// (nothing is cleaned up). It exists for crash testing. Default: nil.
	Faults func(step CommitStep, startTs uint64) error
	// Notified, if set, is called after a transaction that left
	// notifications commits, and after a standalone NotifyWeak, with the
	// rows it notified (each once; nil when there were more than
	// MaxNotifiedRows). Runners use it to have scanners look at those rows
	// at once instead of finding them at their next pass, which is most of
	// an observer chain's latency when the system is quiet, and costs a
	// pass over every pending and recently removed notification when it is
	// busy. It must not block or keep rows. Default: nil.
	Notified func(rows []NotifiedRow)
	// Logger receives diagnostics. Lines written inside a transaction or an
	// observer run are logged with its context, so a handler that adds
	// trace ids (telemetry.NewLogHandler) ties them to the trace. Default:
	// slog.Default().
	Logger *slog.Logger
	// TracerProvider makes the spans of transactions, observer runs and
	// lock resolutions. Default: the global provider (otel.GetTracerProvider),
	// a no-op unless the program installed one (telemetry.Setup).
	TracerProvider trace.TracerProvider
	// MeterProvider receives the DB's and its workers' metrics. Default:
	// the global provider (otel.GetMeterProvider).
	MeterProvider metric.MeterProvider
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.WorkerID == "" {
		o.WorkerID = uuid.NewString()
	}
	if o.LockTTL == 0 {
		o.LockTTL = 20 * time.Second
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = o.LockTTL / 3
	}
	if o.ShortValueMax == 0 {
		o.ShortValueMax = 256
	}
	if o.RowsPerApply == 0 {
		o.RowsPerApply = 256
	}
	if o.OnePhaseMaxRows == 0 {
		o.OnePhaseMaxRows = store.MaxApplyAll
	}
	if o.CommitConcurrency == 0 {
		o.CommitConcurrency = 16
	}
	if o.RetryBackoffMin == 0 {
		o.RetryBackoffMin = time.Millisecond
	}
	if o.RetryBackoffMax == 0 {
		o.RetryBackoffMax = 250 * time.Millisecond
	}
	if o.LockWaitMin == 0 {
		o.LockWaitMin = time.Millisecond
	}
	if o.LockWaitMax == 0 {
		o.LockWaitMax = 100 * time.Millisecond
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

// ErrInvalidOptions is wrapped by every error Validate returns.
var ErrInvalidOptions = engine.ErrInvalidOptions

// Validate reports the first unusable field.
func (o *Options) Validate() error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidOptions, field, why) }
	switch {
	case o.LockTTL < time.Millisecond:
		return bad("LockTTL", "must be at least 1ms")
	case o.HeartbeatInterval <= 0 || o.HeartbeatInterval >= o.LockTTL:
		return bad("HeartbeatInterval", "must be positive and shorter than LockTTL")
	case o.ShortValueMax < 0:
		return bad("ShortValueMax", "must not be negative")
	case o.CommitConcurrency < 1:
		return bad("CommitConcurrency", "must be at least 1")
	case o.RowsPerApply < 1 || o.RowsPerApply > store.MaxApplyAll:
		return bad("RowsPerApply", fmt.Sprintf("must be between 1 and %d", store.MaxApplyAll))
	case o.OnePhaseMaxRows < 1 || o.OnePhaseMaxRows > store.MaxApplyAll:
		return bad("OnePhaseMaxRows", fmt.Sprintf("must be between 1 and %d", store.MaxApplyAll))
	case o.MaxAttempts < 0:
		return bad("MaxAttempts", "must not be negative")
	case o.RetryBackoffMin <= 0 || o.RetryBackoffMax < o.RetryBackoffMin:
		return bad("RetryBackoffMin/Max", "must be positive with Min <= Max")
	case o.LockWaitMin <= 0 || o.LockWaitMax < o.LockWaitMin:
		return bad("LockWaitMin/Max", "must be positive with Min <= Max")
	}
	return nil
}
