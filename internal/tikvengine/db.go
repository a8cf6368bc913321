package tikvengine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tikv/client-go/v2/oracle"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/txnkv/txnsnapshot"
	"github.com/tikv/pd/client/constants"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvcall"
	"github.com/trickle-dev/trickle/store"
)

// The engine whose transactions are TiKV's.
var (
	_ engine.Engine = (*DB)(nil)
	_ engine.Txn    = (*Txn)(nil)
)

// DB runs framework transactions as TiKV transactions on one client. It is
// safe for concurrent use; several DBs (in one process or many) may share
// a cluster and a namespace.
type DB struct {
	kv     *tikvclient.KVStore
	opts   Options
	codec  codec
	tracer trace.Tracer

	// safePoint caches the cluster's transaction safe point (see
	// SafePoint), read at most once per safePointTTL.
	spMu      sync.Mutex
	safePoint atomic.Uint64
	spRead    time.Time

	// active registers the running transactions: the Barrier's, shared
	// with the DBs beside it, if there is one.
	active *active
	// lastTs is the highest timestamp this DB drew (see start).
	lastTs atomic.Uint64
	counts counts
	// recent keeps the notifications of this DB's commits for Pending.
	recent recent
	// predict learns what observers' runs read, for Claim to prefetch.
	predict predictor
	// checks paces Find's checks of locked notifications.
	checks lockChecks
}

// safePointTTL is how long SafePoint answers from its cache: the safe
// point only rises, and a stale one only makes a snapshot check lenient
// for that long (client-go checks every read against its own copy).
const safePointTTL = 10 * time.Second

// New returns an engine on an open TiKV client (one Open of store/tikv
// made, or a test cluster's). The engine does not own the client. opts is
// copied; its Store is required.
func New(client *tikvclient.KVStore, opts *Options) (*DB, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: tikvengine: a TiKV client is required", engine.ErrInvalidOptions)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	db := &DB{kv: client, opts: o, codec: newCodec(o.Namespace), tracer: o.TracerProvider.Tracer(engine.InstrumentationName), active: new(active)}
	if o.Barrier != nil {
		db.active = &o.Barrier.active
	}
	return db, nil
}

// ObservedKind reports whether a write of (table, col) notifies an
// observer, and of which kind, as Options.Observed says.
func (db *DB) ObservedKind(table string, col store.Column) (engine.Kind, bool) {
	if db.opts.Observed == nil {
		return 0, false
	}
	return db.opts.Observed.ObservedKind(table, col)
}

// strongly reports whether a write of (table, col) leaves a notification.
func (db *DB) strongly(table string, col store.Column) bool {
	k, ok := db.ObservedKind(table, col)
	return ok && k == engine.Strong
}

// checkWeak refuses a weak notification of a column no weak observer
// observes.
func (db *DB) checkWeak(table string, col store.Column) error {
	if k, ok := db.ObservedKind(table, col); !ok || k != engine.Weak {
		return fmt.Errorf("%w: %s/%s", engine.ErrNotWeak, table, col)
	}
	return nil
}

// Setup returns the worker id and telemetry the engine was opened with.
func (db *DB) Setup() engine.Setup {
	return engine.Setup{WorkerID: db.opts.WorkerID, Logger: db.opts.Logger, TracerProvider: db.opts.TracerProvider, MeterProvider: db.opts.MeterProvider}
}

// Store returns Options.Store, where the framework keeps its
// non-transactional records.
func (db *DB) Store() store.Store { return db.opts.Store }

// SafePoint returns TiKV's transaction safe point as PD keeps it (PD's GC
// states of the null keyspace, which client-go's own GC advances): reads
// at or above it are complete, and client-go refuses reads below it. It is
// cached for safePointTTL; if PD cannot be asked it returns the last value
// known (0 before any). client-go's mock PD keeps one too (0 until a GC).
func (db *DB) SafePoint() uint64 {
	db.spMu.Lock()
	defer db.spMu.Unlock()
	if !db.spRead.IsZero() && time.Since(db.spRead) < safePointTTL {
		return db.safePoint.Load()
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(db.opts.RequestTimeout, 5*time.Second))
	defer cancel()
	if sp, err := db.readSafePoint(ctx); err == nil {
		if sp > db.safePoint.Load() {
			db.safePoint.Store(sp)
		}
		db.spRead = time.Now()
	} else {
		db.opts.Logger.Warn("tikvengine: reading the GC safe point", "err", err)
	}
	return db.safePoint.Load()
}

// readSafePoint asks PD for the transaction safe point.
func (db *DB) readSafePoint(ctx context.Context) (uint64, error) {
	st, err := db.kv.GetPDClient().GetGCStatesClient(constants.NullKeyspaceID).GetGCState(ctx)
	if err != nil {
		return 0, err
	}
	return st.TxnSafePoint, nil
}

// deadline bounds ctx by Options.RequestTimeout unless it ends earlier.
func (db *DB) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && !d.After(time.Now().Add(db.opts.RequestTimeout)) {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, db.opts.RequestTimeout)
}

// timestamp returns a fresh timestamp from PD.
func (db *DB) timestamp(ctx context.Context) (uint64, error) {
	ctx, cancel := db.deadline(ctx)
	defer cancel()
	ts, err := db.kv.GetOracle().GetTimestamp(ctx, &oracle.Option{TxnScope: oracle.GlobalTxnScope})
	if err != nil {
		return 0, failIn(ctx, "getting a timestamp from PD", err)
	}
	for last := db.lastTs.Load(); ts > last && !db.lastTs.CompareAndSwap(last, ts); last = db.lastTs.Load() {
	}
	return ts, nil
}

// snapshot returns a snapshot at ts whose requests give up once ctx ends,
// and the function that stops watching ctx.
func (db *DB) snapshot(ctx context.Context, ts uint64) (*txnsnapshot.KVSnapshot, func() bool) {
	snap := db.kv.GetSnapshot(ts)
	snap.SetScanBatchSize(db.opts.ScanBatchSize)
	return snap, tikvcall.Watch(ctx, snap)
}
