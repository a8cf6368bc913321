package tikvengine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/tikv/client-go/v2/oracle"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/pd/client/constants"

	"github.com/trickle-dev/trickle/internal/engine"
)

// TiKV has one transaction safe point for the whole cluster, and a
// collection moves it for everyone: another deployment on the cluster (a
// second namespace, a TiDB) that collected from its own processes' reports
// would pass this one's running transactions, which would then read
// thinned snapshots and commit over deletions it dropped. PD's GC
// barriers are how users of one cluster keep each other's transactions:
// the safe point never passes a barrier that has not expired. Every
// process holds one, at its oldest running transaction.

// Barrier defaults.
const (
	DefaultBarrierTTL     = 5 * time.Minute
	DefaultBarrierRefresh = 10 * time.Second
)

// BarrierOptions shape a Barrier.
type BarrierOptions struct {
	// Namespace names the deployment in the barrier's id, for operators
	// reading PD's GC states: "trickle/<Namespace>/<a random id>".
	// Default: DefaultNamespace.
	Namespace string
	// TTL is how long PD keeps the barrier after it was last set: a
	// process that dies holding one holds the cluster's collections back
	// that long, and one paused longer than TTL less a tenth loses it, its
	// transactions failing with engine.ErrSnapshotTooOld. Default:
	// DefaultBarrierTTL.
	TTL time.Duration
	// Refresh is how often the barrier is raised to the oldest running
	// transaction and its TTL renewed; at most TTL/4. Default:
	// DefaultBarrierRefresh.
	Refresh time.Duration
	// History is how much history the barrier keeps below now beside the
	// running transactions, for as-of reads (a deployment's GC lag), so
	// that another deployment's collections keep it too. Default: 0.
	History time.Duration
	// RequestTimeout bounds each request to PD. Default:
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	Logger         *slog.Logger
}

func (o *BarrierOptions) ensureDefaults() {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.TTL == 0 {
		o.TTL = DefaultBarrierTTL
	}
	if o.Refresh == 0 {
		o.Refresh = min(DefaultBarrierRefresh, o.TTL/4)
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

func (o *BarrierOptions) validate() error {
	bad := func(field, why string) error {
		return fmt.Errorf("%w: tikvengine: barrier %s %s", engine.ErrInvalidOptions, field, why)
	}
	switch {
	case o.TTL < time.Second:
		return bad("TTL", "must be at least a second")
	case o.Refresh <= 0 || o.Refresh > o.TTL/4:
		return bad("Refresh", fmt.Sprintf("must be positive and at most TTL/4 (%v)", o.TTL/4))
	case o.History < 0:
		return bad("History", "must not be negative")
	case o.RequestTimeout <= 0:
		return bad("RequestTimeout", "must be positive")
	}
	return nil
}

// Barrier is a process's GC barrier on its cluster, kept at or below
// every transaction running in the DBs that share it (Options.Barrier)
// and refreshed in the background until Close. It is safe for concurrent
// use.
type Barrier struct {
	kv *tikvclient.KVStore
	o  BarrierOptions
	id string
	// active registers the transactions of every DB sharing the barrier.
	active active
	// base and heldUntil say until when the barrier is surely held:
	// heldUntil nanoseconds after base, on this process's monotonic clock.
	base      time.Time
	heldUntil atomic.Int64
	at        atomic.Uint64 // the barrier's timestamp as last set
	// lapses counts the times the barrier was set again after it had
	// lapsed: a transaction begun before one may have been passed.
	lapses  atomic.Uint64
	history atomic.Int64 // History, raised by WithHistory

	setMu sync.Mutex // one set at a time
	stop  context.CancelFunc
	done  chan struct{}
}

// NewBarrier sets a GC barrier on kv's cluster, below any transaction the
// DBs given it will run, and keeps it refreshed until Close. It fails if
// PD cannot set one (a PD without the GC states API, see store/tikv's
// supported versions) rather than let transactions run unprotected.
func NewBarrier(ctx context.Context, kv *tikvclient.KVStore, o *BarrierOptions) (*Barrier, error) {
	if kv == nil {
		return nil, fmt.Errorf("%w: tikvengine: a TiKV client is required", engine.ErrInvalidOptions)
	}
	var opts BarrierOptions
	if o != nil {
		opts = *o
	}
	opts.ensureDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	b := &Barrier{kv: kv, o: opts, id: "trickle/" + opts.Namespace + "/" + uuid.NewString(), base: time.Now(), done: make(chan struct{})}
	b.history.Store(int64(opts.History))
	if err := b.Refresh(ctx); err != nil {
		return nil, err
	}
	loop, stop := context.WithCancel(context.Background())
	b.stop = stop
	go b.keep(loop)
	return b, nil
}

// ID is the barrier's id in PD's GC states.
func (b *Barrier) ID() string { return b.id }

// At is the barrier's timestamp as last set.
func (b *Barrier) At() uint64 { return b.at.Load() }

// WithHistory raises the history the barrier keeps to at least h.
func (b *Barrier) WithHistory(h time.Duration) {
	for cur := b.history.Load(); int64(h) > cur && !b.history.CompareAndSwap(cur, int64(h)); cur = b.history.Load() {
	}
}

// Held reports whether the barrier is surely still held: its last set
// was sent less than its TTL, less a tenth for the clocks' drift, ago.
func (b *Barrier) Held() bool { return int64(time.Since(b.base)) < b.heldUntil.Load() }

// term is the number of lapses so far; a transaction is protected while
// the barrier is held in the term it began in.
func (b *Barrier) term() uint64 { return b.lapses.Load() }

// holds reports whether the barrier has held without a lapse since term.
func (b *Barrier) holds(term uint64) bool { return b.Held() && b.lapses.Load() == term }

func (b *Barrier) keep(ctx context.Context) {
	defer close(b.done)
	t := time.NewTicker(b.o.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := b.Refresh(ctx); err != nil && ctx.Err() == nil {
			b.o.Logger.Warn("tikvengine: refreshing the GC barrier; the next refresh tries again", "barrier", b.id, "held", b.Held(), "err", err)
		}
	}
}

// Refresh raises the barrier to the oldest transaction running in its
// DBs (or now, less History, if that is older) and renews its TTL. The
// timestamp is drawn before the transactions are looked at: one that
// registers later draws its start timestamp later, above it (see start).
// A value below the cluster's transaction safe point is raised to it: a
// snapshot of ours below it (an as-of view) is refused by its own check.
func (b *Barrier) Refresh(ctx context.Context) error {
	b.setMu.Lock()
	defer b.setMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, b.o.RequestTimeout)
	defer cancel()
	now, err := b.kv.GetOracle().GetTimestamp(ctx, &oracle.Option{TxnScope: oracle.GlobalTxnScope})
	if err != nil {
		return failIn(ctx, "drawing a timestamp for the GC barrier", err)
	}
	ts := barrierAt(now, b.active.oldest(), time.Duration(b.history.Load()))
	states := b.kv.GetPDClient().GetGCStatesClient(constants.NullKeyspaceID)
	for attempt := 0; ; attempt++ {
		st, err := states.GetGCState(ctx)
		if err != nil {
			return failIn(ctx, "reading PD's GC state (PD must support GC barriers)", err)
		}
		at := max(ts, st.TxnSafePoint)
		sent := time.Now()
		if _, err = states.SetGCBarrier(ctx, b.id, at, b.o.TTL); err == nil {
			if b.heldUntil.Load() != 0 && !b.Held() {
				// Set again after a lapse: what began before may
				// have been passed meanwhile.
				b.lapses.Add(1)
			}
			b.at.Store(at)
			b.heldUntil.Store(int64(sent.Sub(b.base) + b.o.TTL - b.o.TTL/10))
			return nil
		}
		if attempt == 2 || ctx.Err() != nil {
			return failIn(ctx, fmt.Sprintf("setting the GC barrier %s at %d", b.id, at), err)
		}
		// The safe point moved between the read and the set: read it again.
	}
}

// barrierAt is where a barrier drawn at now goes: below the oldest
// running transaction (0: none) and below now less history, by one, so
// that a collection there resolves none of that transaction's locks.
func barrierAt(now, oldest uint64, history time.Duration) uint64 {
	at := now
	if history > 0 {
		at = oracle.ComposeTS(max(oracle.ExtractPhysical(now)-history.Milliseconds(), 0), 0)
	}
	if oldest != 0 && oldest < at {
		at = oldest
	}
	return max(at, 2) - 1
}

// Close stops refreshing the barrier and deletes it from PD: the
// cluster's collections may pass what its DBs read from then on.
func (b *Barrier) Close() error {
	b.stop()
	<-b.done
	b.setMu.Lock()
	defer b.setMu.Unlock()
	b.lapses.Add(1)
	b.heldUntil.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), b.o.RequestTimeout)
	defer cancel()
	if _, err := b.kv.GetPDClient().GetGCStatesClient(constants.NullKeyspaceID).DeleteGCBarrier(ctx, b.id); err != nil {
		return failIn(ctx, "deleting the GC barrier "+b.id, err)
	}
	return nil
}

// errBarrierLapsed says a transaction's process no longer surely holds its
// GC barrier.
var errBarrierLapsed = errors.New("this process's GC barrier lapsed (paused or cut off from PD longer than its TTL)")
