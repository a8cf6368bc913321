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
// what was synced, opened again) or one on a mock TiKV cluster; an oracle;
// client processes committing in one phase and in two, which crash at
// injected commit steps and pause past their liveness; and a collector
// that passes the paused ones, as the runner's would once their tokens
// expire.
type world struct {
	cfg  Config
	log  *slog.Logger
	view *ownerView
	mem  *vfs.MemFS // the owner's filesystem; nil on TiKV
	or   *oracle.Client
	live *liveness

	collector *percolator.DB
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

// client is one incarnation of a client process: its DB, its lease and
// its view of the store (which a pause freezes).
type client struct {
	id    string
	db    *percolator.DB
	lease *lease
	st    *paused
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
	srv, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: quiet})
	if err != nil {
		return nil, err
	}
	w.closers = append(w.closers, srv.Close)
	if w.or, err = oracle.NewClient(srv, nil); err != nil {
		w.close()
		return nil, err
	}
	w.closers = append(w.closers, w.or.Close)
	switch cfg.Mode {
	case modeInProcess:
		w.mem = vfs.NewCrashableMem()
		st, err := w.openOwner(w.mem)
		if err != nil {
			w.close()
			return nil, err
		}
		w.owner = st
		w.closers = append(w.closers, func() error { return w.owner.Close() })
		w.view.serve(st)
	case modeTiKV:
		c, err := tikvtest.Start(&tikvtest.Options{SplitRows: splits(cfg)})
		if err != nil {
			w.close()
			return nil, err
		}
		w.closers = append(w.closers, c.Close)
		st, err := c.OpenStore(nil)
		if err != nil {
			w.close()
			return nil, err
		}
		w.closers = append(w.closers, st.Close)
		w.view.serve(st)
	default:
		return nil, fmt.Errorf("sicheck: mode %q runs in processes", cfg.Mode)
	}
	if w.collector, err = percolator.New(w.view, w.or, &percolator.Options{WorkerID: "collector", Liveness: w.live, Logger: quiet,
		MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()}); err != nil {
		w.close()
		return nil, err
	}
	return w, nil
}

// splits cuts the lists and the bank's accounts into regions of their own
// on a TiKV cluster of more than one region.
func splits(cfg Config) map[string][][]byte {
	if cfg.Regions <= 1 {
		return nil
	}
	var rows [][]byte
	for i := 1; i < cfg.Regions; i++ {
		rows = append(rows, []byte(fmt.Sprintf("k%d", i*cfg.Keys/cfg.Regions)))
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
// own id, lease and faults. Half the processes commit in two phases only.
func (w *world) newClient(ctx context.Context, crashed *atomic.Bool) (*client, int, error) {
	p := int(w.proc.Add(1))
	var st store.Store = w.view
	if w.cfg.staleReads {
		st = staleReads{w.view}
	}
	c := &client{id: fmt.Sprintf("client-%d", p), lease: &lease{term: 1, held: true}, st: &paused{Store: st}}
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
		if db, err = percolator.New(c.st, w.or, opts); err == nil {
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
			Unknown: func(err error) bool { return errors.Is(err, percolator.ErrCrashed) },
		})
		if err != nil {
			return err
		}
		for w.running(ctx) && !crashed.Load() {
			_ = c.st.wait(ctx) // a paused process does nothing at all
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
			_ = c.st.wait(ctx)
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

// crashOwner kills the owner: from now on nothing it answers arrives,
// and the store restarts from what its disk kept (what was synced).
func (w *world) crashOwner() error {
	w.view.down()
	clone := w.mem.CrashClone(vfs.CrashCloneCfg{})
	st, err := w.openOwner(clone)
	if err != nil {
		return fmt.Errorf("sicheck: the owner's store does not open after a crash: %w", err)
	}
	old := w.owner
	w.mem, w.owner = clone, st
	w.view.serve(st)
	w.fig.ownerCrashes.Add(1)
	go old.Close() // waits for what ran on it, whose answers are lost
	return nil
}

// pauseClient freezes a random live client past its liveness: its token
// expires, a collection passes its transactions, and it resumes, first
// without its lease, then registered again in a new term with the
// persisted safe point adopted, as its refresher would.
func (w *world) pauseClient(ctx context.Context) {
	c := w.randomClient()
	if c == nil {
		return
	}
	c.st.pause()
	c.lease.set(false)
	w.live.kill(c.id)
	w.gcRound(ctx, c)
	c.st.resume()
	if _, err := c.db.AdoptSafePoint(ctx); err != nil {
		w.log.Debug("a resumed client could not adopt the safe point yet", "err", err)
	}
	w.live.revive(c.id)
	c.lease.renew()
	w.fig.pauses.Add(1)
}

// resumeAll resumes every paused client.
func (w *world) resumeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.clients {
		c.st.resume()
	}
}

func (w *world) randomClient() *client {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.clients {
		return c // map order is random enough
	}
	return nil
}

// gcRound collects below the oldest transaction of the live clients but
// skip (a paused one, whose token expired), and now less GCLag.
func (w *world) gcRound(ctx context.Context, skip *client) {
	now, err := w.or.Timestamp(ctx)
	if err != nil {
		return
	}
	sp := oracle.Compose(oracle.PhysicalMillis(now)-w.cfg.GCLag.Milliseconds(), 0)
	w.mu.Lock()
	for c := range w.clients {
		if c != skip {
			if ts := c.db.OldestActive(); ts != 0 && ts < sp {
				sp = ts
			}
		}
	}
	w.mu.Unlock()
	if _, err := w.collector.GC(ctx, sp); err != nil {
		w.log.Debug("gc", "err", err)
		return
	}
	w.fig.gcRounds.Add(1)
}

// faults runs every fault at its interval until ctx ends.
func (w *world) faults(ctx context.Context) error {
	tick := func(d time.Duration) <-chan time.Time {
		if d <= 0 {
			return nil
		}
		return time.Tick(d)
	}
	owner, pause, gc := tick(w.cfg.OwnerCrashEvery), tick(w.cfg.PauseEvery), tick(w.cfg.GCEvery)
	if w.mem == nil {
		owner = nil // a TiKV cluster has no owner
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-owner:
			if err := w.crashOwner(); err != nil {
				return err
			}
		case <-pause:
			w.pauseClient(ctx)
		case <-gc:
			w.gcRound(ctx, nil)
		}
	}
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
	db, err := percolator.New(w.view, w.or, &percolator.Options{WorkerID: "final", Liveness: w.live, Logger: quiet})
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
	r := &Result{Report: sicheck.Check(h), Elapsed: time.Since(began)}
	w.log.Debug("checked", "after", r.Elapsed)
	w.fig.fill(r)
	for _, b := range w.banks {
		r.BankTransfers += b.Transfers
		r.BankReads += b.Reads
		r.Report.Anomalies = append(r.Report.Anomalies, b.Anomalies()...)
	}
	return r, nil
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
