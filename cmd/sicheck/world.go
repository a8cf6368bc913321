package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/percolator"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/sicheck"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// world is a deployment in one process, under faults: a store whose owner
// crashes (a crash clone of its in-memory filesystem, which keeps only
// what was synced, opened again) or one on a mock TiKV cluster, with an
// oracle; or (tikv-native) a mock TiKV cluster whose own transactions the
// clients run; client processes committing in one phase and in two,
// which crash at injected commit steps and pause past their liveness; and
// a collector that passes the paused ones, as the runner's would once
// their tokens expire.
type world struct {
	cfg  Config
	log  *slog.Logger
	live *liveness
	// now draws a timestamp of the deployment's clock: the oracle's, or
	// PD's on tikv-native.
	now func(context.Context) (uint64, error)

	// The modes that run the framework's protocol over a store.
	view *ownerView
	mem  *vfs.MemFS // the owner's filesystem; nil on TiKV
	or   *oracle.Client
	// native is the tikv-native mode's cluster and checks; nil otherwise.
	native *native

	collector engine.Engine
	rec       *sicheck.Recorder
	history   *os.File // the clients' history, as it is recorded
	// owner is the owner's store now (in process): a crash replaces it,
	// and the old one, closed, is dropped with its filesystem.
	owner *store.DB

	mu      sync.Mutex
	clients map[*client]bool // the live incarnations
	banks   []*sicheck.Bank
	proc    atomic.Int32 // the next process number

	fig figures
	// done is closed when the run's time is up: clients stop between
	// transactions (a context that ends would cut requests short, which
	// is a fault of its own, not the one to inject at the end).
	done chan struct{}
	// closers end what the world opened, last first.
	closers []func() error
}

// client is one incarnation of a client process: its engine, its lease
// and the gate a pause closes.
type client struct {
	id    string
	db    engine.Engine
	lease *lease
	gate  *gate
	// unknown says which errors of a commit leave its outcome unknown
	// (sicheck.ListAppendOptions.Unknown).
	unknown func(error) bool
	// close ends what the incarnation opened of its own, if anything.
	close func()
	// leaseless marks a tikv-native process that writes without a lease,
	// as a loader does: it commits asynchronously or in one phase, and is
	// never paused (see startNative).
	leaseless bool
}

// newWorld builds the deployment cfg describes.
func newWorld(cfg Config) (*world, error) {
	w := &world{cfg: cfg, log: cfg.Logger, view: &ownerView{}, live: newLiveness(), clients: map[*client]bool{}, done: make(chan struct{})}
	hist, err := os.CreateTemp("", "sicheck-history-")
	if err != nil {
		return nil, err
	}
	w.history = hist
	w.closers = append(w.closers, func() error { hist.Close(); return os.Remove(hist.Name()) })
	w.rec = sicheck.NewRecorder(hist)
	if cfg.Mode == modeTiKVNative {
		err = w.openNative(time.Now())
	} else {
		err = w.openLayered(time.Now())
	}
	if err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// openLayered starts the deployment of the modes that run the framework's
// protocol over a store: an oracle, the store (its owner's, or one on a
// mock TiKV cluster), and the collector.
func (w *world) openLayered(began time.Time) error {
	srv, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: quiet})
	if err != nil {
		return err
	}
	w.closers = append(w.closers, srv.Close)
	if w.or, err = oracle.NewClient(srv, nil); err != nil {
		return err
	}
	w.closers = append(w.closers, w.or.Close)
	w.now = w.or.Timestamp
	switch w.cfg.Mode {
	case modeInProcess:
		w.mem = vfs.NewCrashableMem()
		st, err := w.openOwner(w.mem)
		if err != nil {
			return err
		}
		w.owner = st
		w.closers = append(w.closers, func() error { return w.owner.Close() })
		w.view.serve(st)
	case modeTiKV:
		c, err := tikvtest.Start(&tikvtest.Options{SplitRows: splitRows(w.cfg, began)})
		if err != nil {
			return err
		}
		w.closers = append(w.closers, c.Close)
		st, err := c.OpenStore(nil)
		if err != nil {
			return err
		}
		w.closers = append(w.closers, st.Close)
		w.view.serve(st)
	default:
		return fmt.Errorf("sicheck: mode %q runs in processes", w.cfg.Mode)
	}
	w.collector, err = percolator.New(w.view, w.or, &percolator.Options{WorkerID: "collector", Liveness: w.live, Logger: quiet,
		MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()})
	return err
}

// splitRows cuts the lists and the bank's accounts into regions on a TiKV
// cluster of more than one region: the accounts in two halves, and the
// keys of each rotation (see sicheck.ListAppendOptions.RotateEvery) from
// began on, for twice the run's duration and ten seconds more, in
// cfg.Regions parts, so that a transaction's lists span regions (past
// that, the lists of later rotations share one region). A rotation's keys
// are consecutive numbers of as many digits, so they sort as numbers.
func splitRows(cfg Config, began time.Time) map[string][][]byte {
	if cfg.Regions <= 1 {
		return nil
	}
	first, last := 0, 0
	if r := cfg.RotateEvery; r > 0 {
		first = int(began.UnixNano() / int64(r))
		last = int(began.Add(2*cfg.Duration+10*time.Second).UnixNano() / int64(r))
	}
	var rows [][]byte
	for g := first; g <= last; g++ {
		for i := 1; i < cfg.Regions; i++ {
			if k := i * cfg.Keys / cfg.Regions; k > 0 {
				rows = append(rows, []byte("k"+strconv.Itoa(g*cfg.Keys+k)))
			}
		}
	}
	return map[string][][]byte{"sicheck": rows, "sicheck_bank": {[]byte("a4")}}
}

// openOwner opens the owner's store on fs, synced as a runner's is.
func (w *world) openOwner(fs vfs.FS) (*store.DB, error) {
	return store.Open("store", protocol.StoreOptions(&store.Options{FS: fs, Logger: quiet, CacheSize: 8 << 20}))
}

func (w *world) close() {
	w.mu.Lock()
	closers := w.closers
	w.closers = nil
	w.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		_ = closers[i]()
	}
}

// newClient starts an incarnation of a client process: a worker with its
// own id, lease and faults, which sets crashed when one kills it. Half the
// processes commit in two phases only.
func (w *world) newClient(ctx context.Context, crashed *atomic.Bool) (*client, int, error) {
	if w.native != nil {
		return w.newNativeClient(ctx, crashed)
	}
	p := int(w.proc.Add(1))
	var st store.Store = w.view
	if w.cfg.staleReads {
		st = staleReads{w.view}
	}
	view := &paused{Store: st}
	c := &client{id: fmt.Sprintf("client-%d", p), lease: &lease{term: 1, held: true}, gate: &view.gate,
		unknown: func(err error) bool { return errors.Is(err, percolator.ErrCrashed) }}
	opts := &percolator.Options{
		WorkerID: c.id, Liveness: w.live, Lease: c.lease, LockTTL: 10 * time.Second,
		DisableOnePhase: p%2 == 0, Logger: quiet,
		// A DB registers its metrics with the provider for good: the
		// global one keeps them until a real provider is set, and a soak
		// opens thousands of DBs.
		MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider(),
	}
	if n := w.cfg.CrashOneIn; n > 0 {
		opts.Faults = func(percolator.CommitStep, uint64) error {
			if rand.IntN(n) == 0 {
				crashed.Store(true)
				return errors.New("sicheck: injected crash")
			}
			return nil
		}
	}
	// A client process starts once it reaches the store (New reads the
	// safe point there), or the run ends.
	var db *percolator.DB
	var err error
	for {
		if db, err = percolator.New(view, w.or, opts); err == nil {
			break
		}
		if !w.running(ctx) {
			return nil, 0, err
		}
		w.log.Debug("a client process could not start yet", "err", err)
		backOff(ctx)
	}
	c.db = db
	w.mu.Lock()
	w.clients[c] = true
	w.mu.Unlock()
	return c, p, nil
}

// died ends an incarnation: its process is gone, its token with it.
func (w *world) died(c *client) {
	w.live.kill(c.id)
	w.mu.Lock()
	delete(w.clients, c)
	w.mu.Unlock()
	w.fig.clientCrashes.Add(1)
	if c.close != nil {
		c.close()
	}
}

// running reports whether the run's time is not up.
func (w *world) running(ctx context.Context) bool {
	select {
	case <-w.done:
		return false
	default:
		return ctx.Err() == nil
	}
}

// runListAppend runs list-append transactions until the run ends, in
// incarnation after incarnation: an injected crash ends one.
func (w *world) runListAppend(ctx context.Context) error {
	for w.running(ctx) {
		var crashed atomic.Bool
		c, p, err := w.newClient(ctx, &crashed)
		if err != nil {
			return nil // the run ended while the process started
		}
		la, err := sicheck.NewListAppend((*framework.DB)(engine.NewDB(c.db)), w.rec, &sicheck.ListAppendOptions{
			Process: p, Keys: w.cfg.Keys, RotateEvery: w.cfg.RotateEvery,
			Unknown: c.unknown,
		})
		if err != nil {
			return err
		}
		for w.running(ctx) && !crashed.Load() {
			_ = c.gate.wait(ctx) // a paused process does nothing at all
			if la.Step(ctx) != sicheck.OK {
				backOff(ctx) // the owner may be down: do not spin
			}
		}
		if crashed.Load() {
			w.died(c)
		}
	}
	return nil
}

// runBank moves money and reads balances until the run ends, in
// incarnation after incarnation.
func (w *world) runBank(ctx context.Context) error {
	for w.running(ctx) {
		var crashed atomic.Bool
		c, _, err := w.newClient(ctx, &crashed)
		if err != nil {
			return nil // the run ended while the process started
		}
		b, err := sicheck.NewBank((*framework.DB)(engine.NewDB(c.db)), &sicheck.BankOptions{Accounts: 8})
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.banks = append(w.banks, b)
		w.mu.Unlock()
		for w.running(ctx) && !crashed.Load() {
			if err := b.Open(ctx); err == nil {
				break
			}
		}
		for w.running(ctx) && !crashed.Load() {
			_ = c.gate.wait(ctx)
			if b.Step(ctx) != nil { // a crash, a dead owner: the next step goes on
				backOff(ctx)
			}
		}
		if crashed.Load() {
			w.died(c)
		}
	}
	return nil
}

// run runs the workloads under faults for cfg.Duration, then one read of
// every key, and checks the history.
func (w *world) run(ctx context.Context) (*Result, error) {
	began := time.Now()
	fctx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()
	var clients, faults sync.WaitGroup
	errs := make(chan error, w.cfg.Clients+w.cfg.BankClients+1)
	for range w.cfg.Clients {
		clients.Go(func() { errs <- w.runListAppend(ctx) })
	}
	for range w.cfg.BankClients {
		clients.Go(func() { errs <- w.runBank(ctx) })
	}
	faults.Go(func() { errs <- w.faults(fctx) })
	select {
	case <-time.After(w.cfg.Duration):
	case <-ctx.Done():
	}
	if !awaitFaults(ctx, w.cfg, &w.fig, false) {
		w.log.Warn("not every fault happened -min-faults times")
	}
	stopFaults()
	faults.Wait()
	w.resumeAll() // a client paused at the end finishes its transaction
	close(w.done)
	clients.Wait()
	w.log.Debug("the clients stopped", "after", time.Since(began))
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	// The last read, by a client no fault touches.
	db, err := w.finalDB()
	if err != nil {
		return nil, err
	}
	final, err := sicheck.NewListAppend((*framework.DB)(engine.NewDB(db)), w.rec, &sicheck.ListAppendOptions{Process: int(w.proc.Add(1)), Keys: w.cfg.Keys, RotateEvery: w.cfg.RotateEvery})
	if err != nil {
		return nil, err
	}
	// A read that fails takes no part in the check: try again.
	for attempt := 1; final.ReadSince(ctx, began) != sicheck.OK; attempt++ {
		if attempt == 10 || ctx.Err() != nil {
			return nil, fmt.Errorf("sicheck: the final read of every key did not commit: %w", final.Err())
		}
		backOff(ctx)
	}
	if err := w.rec.Err(); err != nil {
		return nil, err
	}
	w.log.Debug("the final read is done", "after", time.Since(began))
	if _, err := w.history.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	h, err := sicheck.ReadHistory(bufio.NewReaderSize(w.history, 1<<20))
	if err != nil {
		return nil, err
	}
	r := &Result{Mode: w.cfg.Mode, Report: sicheck.Check(h), Elapsed: time.Since(began)}
	w.log.Debug("checked", "after", r.Elapsed)
	w.fig.fill(r)
	for _, b := range w.banks {
		r.BankTransfers += b.Transfers
		r.BankReads += b.Reads
		r.Report.Anomalies = append(r.Report.Anomalies, b.Anomalies()...)
	}
	if w.native != nil {
		r.Report.Anomalies = append(r.Report.Anomalies, w.native.found()...)
	}
	return r, nil
}

// finalDB opens the engine of the last read, which no fault touches.
func (w *world) finalDB() (engine.Engine, error) {
	if w.native != nil {
		return w.native.open(w.native.cluster.KV, "final", nil, false)
	}
	return percolator.New(w.view, w.or, &percolator.Options{WorkerID: "final", Liveness: w.live, Logger: quiet})
}

// backOff waits a little before a client tries again after a failure.
func backOff(ctx context.Context) {
	t := time.NewTimer(time.Duration(1+rand.IntN(5)) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// quiet discards the framework's logs, which faults fill with expected
// warnings.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
