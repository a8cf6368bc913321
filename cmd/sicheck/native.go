package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tikv/client-go/v2/metrics"
	tikvoracle "github.com/tikv/client-go/v2/oracle"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvengine"
	"github.com/trickle-dev/trickle/sicheck"
	"github.com/trickle-dev/trickle/store/tikv"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// native is what the tikv-native mode adds to a world: a mock TiKV
// cluster whose own transactions the clients run (internal/tikvengine),
// each client process with a TiKV client of its own, and the check that
// no transaction uses a read a collection had passed.
//
// TiKV keeps every version on client-go's mock (a collection resolves
// locks and moves the safe point, and drops nothing), so a read below the
// safe point still answers right there, and the history alone would not
// show a transaction that used one. The check stands in for the thinned
// snapshot a real cluster would have served: a collection's safe point is
// noted before it starts, every read answered below it is noted by its
// snapshot (a paused client's, resumed), and a transaction at that
// snapshot that commits (or a read-only one that returns) is an anomaly.
type native struct {
	cluster *tikvtest.Cluster
	// store keeps the framework's bookkeeping (tikvengine.Options.Store),
	// as framework.Open's engine on a TiKV store does.
	store *tikv.Store
	fig   *figures
	// noLease opens the clients without a lease, and has them ignore
	// the safe point when they resume (Config.noLease): a broken
	// engine, whose paused transactions read on below the safe point.
	noLease bool
	// passed is the highest safe point a collection set out to reach.
	passed atomic.Uint64

	mu        sync.Mutex
	anomalies []sicheck.Anomaly
	// closing counts the clients of dead processes still to close.
	closing sync.WaitGroup
}

// openNative starts the tikv-native deployment: the cluster (split as
// cfg.Regions says, in the engine's key range), the store of the
// framework's bookkeeping and the collector, an engine on the cluster's
// own client that no fault touches.
func (w *world) openNative(began time.Time) error {
	ns := tikv.EngineNamespace(tikv.DefaultNamespace)
	var split [][]byte
	for table, rows := range splitRows(w.cfg, began) {
		for _, r := range rows {
			split = append(split, tikvengine.RowKey(ns, table, r))
		}
	}
	c, err := tikvtest.Start(&tikvtest.Options{SplitKeys: split})
	if err != nil {
		return err
	}
	w.closers = append(w.closers, c.Close)
	st, err := c.OpenStore(nil)
	if err != nil {
		return err
	}
	w.closers = append(w.closers, st.Close)
	n := &native{cluster: c, store: st, fig: &w.fig, noLease: w.cfg.noLease}
	w.fig.commitsAt = metrics.GetTxnCommitCounter()
	w.native = n
	// The clients close before the store and the cluster.
	w.closers = append(w.closers, func() error {
		w.mu.Lock()
		for c := range w.clients {
			c.close()
		}
		w.mu.Unlock()
		n.closing.Wait()
		return nil
	})
	w.now = func(ctx context.Context) (uint64, error) {
		return c.KV.GetOracle().GetTimestamp(ctx, &tikvoracle.Option{TxnScope: tikvoracle.GlobalTxnScope})
	}
	w.collector, err = n.open(c.KV, "collector", nil, false)
	return err
}

// open opens an engine on kv as framework.Open would on the cluster's
// store, with l as its lease (nil: none), committing in two phases only if
// twoPhase (else with async commit and one-phase commit on).
func (n *native) open(kv *tikvclient.KVStore, id string, l *lease, twoPhase bool) (*tikvengine.DB, error) {
	o := &tikvengine.Options{
		Namespace: tikv.EngineNamespace(tikv.DefaultNamespace), Store: n.store, WorkerID: id,
		DisableAsyncCommit: twoPhase, Disable1PC: twoPhase, Logger: quiet,
		MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider(),
	}
	if l != nil {
		o.Lease = l
	}
	return tikvengine.New(kv, o)
}

// newNativeClient starts an incarnation of a client process on
// tikv-native: a TiKV client of its own, whose requests go through its
// faults (see faultyRPC), and an engine on it: a third with a lease and
// committing in two phases, a third with a lease and async commit and
// 1PC asked for (the lease check makes them two-phase), a third without
// a lease, committing asynchronously or in one phase. A
// process starts once its client and engine open, or the run ends.
func (w *world) newNativeClient(ctx context.Context, crashed *atomic.Bool) (*client, int, error) {
	for {
		c, p, err := w.startNative(crashed)
		if err == nil || !w.running(ctx) {
			return c, p, err
		}
		w.log.Debug("a client process could not start yet", "err", err)
		backOff(ctx)
	}
}

// startNative makes one attempt at starting a tikv-native client process.
func (w *world) startNative(crashed *atomic.Bool) (*client, int, error) {
	n := w.native
	p := int(w.proc.Add(1))
	c := &client{id: fmt.Sprintf("client-%d", p), lease: &lease{term: 1, held: true}}
	rpc := &faultyRPC{crashOneIn: w.cfg.CrashOneIn, passed: &n.passed, fig: n.fig, crashed: crashed,
		below: map[uint64]uint64{}, prewrote: map[uint64]bool{}}
	kv, err := n.cluster.NewClient(func(inner tikvclient.Client) tikvclient.Client {
		rpc.Client = inner
		return rpc
	})
	if err != nil {
		return nil, 0, err
	}
	l := c.lease
	// A third of the processes write without a lease, as a loader does,
	// and so commit asynchronously or in one phase where the others'
	// lease check makes every commit two-phase. The collections count
	// them by their oldest transaction like every process here; they are
	// not paused, since what keeps a paused lease-less writer safe on a
	// shared cluster is its GC barrier, whose refresher a pause here
	// would not stop (the engine's tests cover a lapsed barrier).
	twoPhase := p%3 == 0
	if p%3 == 2 {
		l, c.leaseless = nil, true
	}
	if n.noLease {
		l = nil
	}
	db, err := n.open(kv, c.id, l, twoPhase)
	if err != nil {
		kv.Close()
		return nil, 0, err
	}
	c.db = &checked{Engine: db, rpc: rpc, n: n, id: c.id}
	c.gate = &rpc.gate
	c.unknown = func(err error) bool { return errors.Is(err, engine.ErrCommitUnknown) || errors.Is(err, errDead) }
	c.close = func() { n.retire(kv) }
	w.mu.Lock()
	w.clients[c] = true
	w.mu.Unlock()
	return c, p, nil
}

// retire closes a client process's TiKV client a second later: what it
// still runs in the background (a commit's secondaries, a cleanup) fails
// at once once the process is dead, and is gone by then.
func (n *native) retire(kv *tikvclient.KVStore) {
	n.closing.Add(1)
	time.AfterFunc(time.Second, func() {
		defer n.closing.Done()
		kv.Close()
	})
}

// passing notes that a collection sets out to reach sp.
func (n *native) passing(sp uint64) {
	for {
		cur := n.passed.Load()
		if sp <= cur || n.passed.CompareAndSwap(cur, sp) {
			return
		}
	}
}

func (n *native) anomaly(kind, detail string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.anomalies = append(n.anomalies, sicheck.Anomaly{Kind: kind, Detail: detail})
}

// found returns the anomalies the check found.
func (n *native) found() []sicheck.Anomaly {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]sicheck.Anomaly(nil), n.anomalies...)
}

// checked is a client process's engine as the check sees it: a
// transaction that ends well must not have had a read answered below a
// collection's safe point.
type checked struct {
	engine.Engine
	rpc *faultyRPC
	n   *native
	id  string
}

// Transact runs the transaction and checks the snapshot of its last
// attempt (the one that ended it).
func (d *checked) Transact(ctx context.Context, o engine.TxnOptions, fn func(context.Context, engine.Txn) error) error {
	var ts uint64
	err := d.Engine.Transact(ctx, o, func(ctx context.Context, tx engine.Txn) error {
		ts = tx.StartTs()
		return fn(ctx, tx)
	})
	if d.rpc.prewroteBelow(ts) && err == nil && !o.ReadOnly && o.At == 0 {
		// Its prewrite was checked for conflicts after a collection may
		// have dropped a deletion it should have met (the mock drops
		// nothing, so the history alone would not show it).
		d.n.fig.commitsBelow.Add(1)
		d.n.anomaly("prewrite-below-safe-point", fmt.Sprintf("%s: a transaction at %d committed with a prewrite sent after a collection set out to reach a safe point above it", d.id, ts))
	}
	if sp, below := d.rpc.readBelow(ts); below && err == nil {
		what := "committed"
		if o.ReadOnly || o.At != 0 {
			what = "returned"
		}
		d.n.anomaly("read-below-safe-point", fmt.Sprintf("%s: a transaction at %d %s with a read answered after a collection set out to reach %d", d.id, ts, what, sp))
	}
	return err
}

// AdoptSafePoint adopts the collections' safe point, unless the engine is
// broken (native.noLease).
func (d *checked) AdoptSafePoint(ctx context.Context) (uint64, error) {
	if d.n.noLease {
		return 0, nil
	}
	return d.Engine.AdoptSafePoint(ctx)
}
