package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/scanner"
	"github.com/trickle-dev/trickle/telemetry"
)

// Runner is a running worker process: scanners feeding observers.
type Runner struct {
	node *Node
	db   *framework.DB
	mux  *http.ServeMux

	cfg        Config
	httpLn     net.Listener // nil when HTTP is off
	engine     engine.Engine
	proc       *notify.Processor
	live       *cluster.Liveness
	locks      *rowLocks
	ownMetrics *sdkmetric.MeterProvider // made by Start; shut down by Close
	sc         *scanner.Scanner
	// loops are the goroutines Run started (see spawn).
	loops sync.WaitGroup
	// woken is sc once it exists: wake-ups may arrive before.
	woken   atomic.Pointer[scanner.Scanner]
	wakeSub *nats.Subscription
	// gcRounds counts the collection rounds this runner finished.
	gcRounds atomic.Uint64
}

// Start opens the deployment and prepares workers for reg's observers
// (freezing reg) without starting them; Run starts them. Start publishes the
// observed columns so that writers that run no observers notify them.
func Start(ctx context.Context, cfg Config, reg *framework.Registry) (*Runner, error) {
	if cfg.Private {
		return nil, errors.New("runner: a runner cannot be private: it needs NATS for liveness and locks")
	}
	var ownMetrics *sdkmetric.MeterProvider
	if cfg.MeterProvider == nil && cfg.MetricsHandler == nil {
		if h := telemetry.MetricsHandler(); h != nil {
			cfg.MetricsHandler = h
		} else {
			mp, h, err := telemetry.NewPrometheusMeterProvider()
			if err != nil {
				return nil, fmt.Errorf("runner: metrics: %w", err)
			}
			ownMetrics, cfg.MeterProvider, cfg.MetricsHandler = mp, mp, h
		}
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The TiKV client's metrics go where the runner serves its own, and
	// nowhere if it serves none.
	var tikvMetrics *prometheus.Registry
	if cfg.onTiKV() && cfg.MetricsHandler != nil && cfg.HTTPAddr != "off" && cfg.TiKV.Metrics == nil {
		tikvMetrics = prometheus.NewRegistry()
		cfg.TiKV.Metrics = tikvMetrics
	}
	cfg.Deployment.History = max(cfg.Deployment.History, cfg.GCLag)
	node, err := Open(ctx, cfg.Deployment)
	if err != nil {
		if ownMetrics != nil {
			ownMetrics.Shutdown(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	r := &Runner{node: node, cfg: cfg, mux: http.NewServeMux(), ownMetrics: ownMetrics}
	if h := cfg.MetricsHandler; h != nil {
		if tikvMetrics != nil {
			h = withClientMetrics(h, tikvMetrics)
		}
		r.mux.Handle("GET /metrics", h)
	}
	mountProfiles(r.mux)
	if err := r.listenHTTP(); err != nil {
		r.Close()
		return nil, err
	}
	if err := r.start(ctx, reg); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *Runner) start(ctx context.Context, reg *framework.Registry) error {
	cfg := r.cfg
	if err := r.node.startLiveness(ctx, hostInfo(), true); err != nil {
		return err
	}
	r.live = r.node.Liveness()
	shared, err := cluster.NewRowLocks(ctx, r.node.js, cfg.WorkerID, cluster.RowLockOptions{
		Bucket: cfg.Namespace + "_rowlocks", Logger: cfg.Logger,
	})
	if err != nil {
		return fmt.Errorf("runner: row locks: %w", err)
	}
	r.locks = newRowLocks(shared, cfg.WorkerID, r.node.log)
	r.locks.check(ctx, r.live)
	if err := registerRowLockMetrics(cfg.MeterProvider, r.locks); err != nil {
		cfg.Logger.Warn("row lock metrics unavailable", "err", err)
	}
	if err := registerLagMetrics(cfg.MeterProvider, &lagSampler{st: r.node.st, log: r.node.log}); err != nil {
		cfg.Logger.Warn("observer lag metrics unavailable", "err", err)
	}
	reg.Freeze()
	// Published first, so that the DB notifies exactly reg's columns.
	if err := notify.Publish(ctx, r.node.st, reg); err != nil {
		if errors.Is(err, notify.ErrPublishConflict) {
			return fmt.Errorf("runner: %w; once no runner of the deployment runs the other observer, remove it with `runner unpublish OBSERVER`", err)
		}
		return err
	}
	if r.db, err = r.node.openEngine(ctx, reg, r.wakeAll); err != nil {
		return err
	}
	r.engine = (*engine.DB)(r.db).Engine()
	if r.wakeSub, err = r.node.nc.Subscribe(r.node.wakeSubject(), r.onWake); err != nil {
		return fmt.Errorf("runner: subscribing to wake-ups: %w", err)
	}
	r.proc = notify.NewProcessor(r.db, reg)
	sc, err := scanner.New(r.proc, &scanner.Options{
		Tables:      reg.Tables,
		Scanners:    cfg.Scanners,
		Concurrency: cfg.Workers,
		Locks:       r.locks,
		Failures:    r.proc,
		Observer: func(n notify.Notification) string {
			if o, ok := reg.Lookup(n.Table, n.Column); ok {
				return o.Name
			}
			return ""
		},
		Delay: func(n notify.Notification) time.Duration {
			o, _ := reg.Lookup(n.Table, n.Column)
			return o.Delay
		},
		Logger:        cfg.Logger,
		MeterProvider: cfg.MeterProvider,
	})
	r.sc = sc
	r.woken.Store(sc)
	return err
}

// Node returns the runner's connection to its deployment.
func (r *Runner) Node() *Node { return r.node }

// DB returns the runner's DB: pipelines serve queries with it, and its
// writes notify observers like anyone's.
func (r *Runner) DB() *framework.DB { return r.db }

// Mux returns the runner's HTTP handler, served on Config.HTTPAddr by Run:
// pipelines mount their APIs on it between Start and Run.
func (r *Runner) Mux() *http.ServeMux { return r.mux }

// Stats counts what a runner did since it started.
type Stats struct {
	Runs      uint64 // observer transactions committed
	Skipped   uint64 // notifications with nothing new to do
	Failures  uint64 // observer runs that failed (and will be retried)
	Committed uint64 // transactions committed, observers' and others'
	Conflicts uint64 // commits that conflicted (and were retried)
	// GCRounds counts the garbage collection rounds this runner decided
	// (collecting, or finding that the safe point could not move), so that
	// a caller can wait for rounds to pass instead of guessing a duration.
	GCRounds uint64
}

// Stats returns the runner's counters.
func (r *Runner) Stats() Stats {
	ps, es := r.proc.Stats(), r.engine.Counts()
	return Stats{Runs: ps.Runs.Load(), Skipped: ps.Skipped.Load(), Failures: ps.Failures.Load(),
		Committed: es.Committed, Conflicts: es.Conflicts, GCRounds: r.gcRounds.Load()}
}

// wakeAll is the DB's Notified hook: this runner's scanners and every
// other process's look at the rows just notified.
func (r *Runner) wakeAll(rows []framework.NotifiedRow) {
	r.tellScanners(rows)
	r.node.wakeRunners(rows)
}

// Run runs the scanners and observers until ctx ends, then waits for the
// observer transactions in flight.
func (r *Runner) Run(ctx context.Context) error {
	r.node.log.Info("runner started", "worker", r.node.cfg.WorkerID, "owner", r.node.Owner(),
		"observers", len(r.proc.Registry().Observers()), "scanners", r.cfg.Scanners, "workers", r.cfg.Workers)
	bg, stop := context.WithCancel(ctx)
	// Its loops end with it (stop, then wait), before Close can release
	// what they use: a takeover or a collection never runs on a closed
	// node.
	defer r.loops.Wait()
	defer stop()
	r.spawn(func() { r.serveHTTP(bg) })
	r.spawn(func() { r.locks.follow(bg, r.live, lockModeInterval(r.cfg.LivenessTTL)) })
	switch {
	case r.node.TiKV() != nil:
		// No owner: the runner holding the GC lease collects, and TiKV
		// compacts the notifications' tombstones by itself.
		if r.cfg.GCInterval > 0 {
			r.spawn(func() { r.collectLeased(bg) })
		}
	case r.node.Owner():
		r.ownerLoops(bg)
	case r.node.canTakeOver():
		r.spawn(func() { r.standBy(bg) })
	}
	err := r.sc.Run(ctx)
	s := r.sc.Stats()
	r.node.log.Info("runner stopped", "ran", s.Ran.Load(), "skipped", s.Skipped.Load(), "failed", s.Failed.Load())
	return err
}

// spawn runs f in a goroutine that Run waits for before it returns.
func (r *Runner) spawn(f func()) {
	r.loops.Add(1)
	go func() {
		defer r.loops.Done()
		f()
	}()
}

// ownerLoops starts what only the owner of the store does: collecting old
// versions and compacting processed notifications.
func (r *Runner) ownerLoops(ctx context.Context) {
	if r.cfg.GCInterval > 0 {
		r.spawn(func() { r.collect(ctx) })
	}
	if r.cfg.CompactInterval > 0 {
		r.spawn(func() { r.compactNotifications(ctx) })
	}
}

// standBy waits, while this runner is a client of the owner of its data
// directory, for the owner to die, and then takes the directory over (see
// Node.takeOver): the deployment keeps a store without anyone restarting
// anything.
func (r *Runner) standBy(ctx context.Context) {
	every(ctx, takeOverPoll, func() bool {
		took, err := r.node.takeOver(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.node.log.Error("taking over the data directory failed; trying again", "err", err)
			}
			return true
		}
		if took {
			r.ownerLoops(ctx)
			r.tellScanners(nil)
		}
		return !took
	})
}

// Close stops the runner's services and releases the deployment.
func (r *Runner) Close() error {
	if r.wakeSub != nil {
		_ = r.wakeSub.Unsubscribe()
	}
	if r.httpLn != nil {
		r.httpLn.Close()
	}
	err := r.node.Close()
	if r.ownMetrics != nil {
		r.ownMetrics.Shutdown(context.Background())
	}
	return err
}

// Run starts a runner for reg and runs it until ctx ends.
func Run(ctx context.Context, cfg Config, reg *framework.Registry) error {
	r, err := Start(ctx, cfg, reg)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Run(ctx)
}
