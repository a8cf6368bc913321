// Package frameworktest runs observers in process, for testing them: one
// call starts a store in memory, an oracle and a runner of a registry's
// observers, and returns a DB to write with and WaitForObservers to wait
// until the observers are done.
package frameworktest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/retry"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/scanner"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// Options configure Start. The zero value is usable: EnsureDefaults fills
// every unset field.
type Options struct {
	// Store is the store to run on, for tests that wrap one (to count or
	// fail its calls). It must have been opened with the framework's
	// locality groups (see framework.StoreOptions). Default: a fresh store
	// in memory, closed by Close: a pebble store, or, when the environment
	// variable TRICKLE_TEST_ENGINE is "tikv", a store on a fresh in-process
	// TiKV cluster (client-go's mock), whose transactions are TiKV's own —
	// how a test suite runs on both engines.
	Store store.Store
	// Oracle is the timestamp oracle to run on, for tests that start a
	// second deployment on the Store of a first one (a restart, a new
	// observer): timestamps must keep increasing across both. Close
	// leaves it open. Default: a fresh oracle in memory, closed by Close.
	Oracle *oracle.Server
	// Workers bounds the observer transactions in flight. Default: 8.
	Workers int
	// Scanners is the number of scanning goroutines. Default: 2.
	Scanners int
	// IdleWait is how long scanners pause after finding nothing, unless
	// a commit wakes them first. Default: 20ms.
	IdleWait time.Duration
	// LockTTL is the transaction lock TTL. Default: 10s.
	LockTTL time.Duration
	// Logger receives diagnostics. Default: a logger that discards them.
	Logger *slog.Logger
	// Locks are the scanners' advisory row locks: several Envs on one
	// store share one set, as the runners of a deployment share theirs
	// over NATS, so that two of them do not run the same row's observers
	// at once. Default: locks of this Env only.
	Locks scanner.RowLocker
	// Notified, if set, is also given the rows each commit of the
	// deployment's DB notified, as a runner hands them to the other
	// processes of its deployment: a test that starts several Envs on one
	// store wakes the others' scanners with it (see Env.Wake). Default:
	// nil.
	Notified func(rows []framework.NotifiedRow)
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Workers == 0 {
		o.Workers = 8
	}
	if o.Scanners == 0 {
		o.Scanners = 2
	}
	if o.IdleWait == 0 {
		o.IdleWait = 20 * time.Millisecond
	}
	if o.LockTTL == 0 {
		o.LockTTL = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Env is a running in-process deployment.
type Env struct {
	st      store.Store
	ownSt   io.Closer
	ts      *oracle.Server
	ownTs   *oracle.Server // ts, if Start made it
	db      *framework.DB
	proc    *notify.Processor
	sc      *scanner.Scanner
	tables  []string
	stop    context.CancelFunc
	stopped chan struct{}
}

// Start starts observers of reg (frozen from then on) on a fresh store,
// scanning for notifications until Close.
func Start(ctx context.Context, reg *framework.Registry, opts *Options) (*Env, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	e := &Env{st: o.Store, stopped: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			e.closeParts()
		}
	}()
	if e.st == nil {
		st, closer, err := freshStore(o.Logger)
		if err != nil {
			return nil, err
		}
		e.ownSt, e.st = closer, st
	}
	ts := o.Oracle
	var err error
	if ts == nil {
		if ts, err = oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: o.Logger}); err != nil {
			return nil, err
		}
		e.ownTs = ts
	}
	e.ts = ts
	reg.Freeze()
	var sc *scanner.Scanner
	// Published first, so that the DB notifies exactly reg's columns.
	if err := notify.Publish(ctx, e.st, reg); err != nil {
		return nil, err
	}
	e.db, err = framework.Open(ctx, e.st, ts, &framework.Options{
		Engine: engineOf(o.Store), Observers: reg, WorkerID: "frameworktest", LockTTL: o.LockTTL, Logger: o.Logger,
		// The scanners look at the rows of committed notifications at once.
		Notified: func(rows []framework.NotifiedRow) {
			if sc != nil {
				sc.Notified(rows)
			}
			if o.Notified != nil {
				o.Notified(rows)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	e.proc = notify.NewProcessor(e.db, reg)
	e.tables = reg.Tables()
	sc, err = scanner.New(e.proc, &scanner.Options{
		Tables: reg.Tables, Scanners: o.Scanners, Concurrency: o.Workers, IdleWait: o.IdleWait,
		RetryMin: 10 * time.Millisecond, RetryMax: time.Second, Failures: e.proc, Logger: o.Logger, Locks: o.Locks,
		Observer: func(n notify.Notification) string {
			ob, _ := reg.Lookup(n.Table, n.Column)
			return ob.Name
		},
		Delay: func(n notify.Notification) time.Duration {
			ob, _ := reg.Lookup(n.Table, n.Column)
			return ob.Delay
		},
	})
	if err != nil {
		return nil, err
	}
	e.sc = sc
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	e.stop = stop
	go func() {
		defer close(e.stopped)
		sc.Run(runCtx)
	}()
	ok = true
	return e, nil
}

// Wake has the deployment's scanners look at rows at once, as a wake-up
// from another process of a deployment does.
func (e *Env) Wake(rows []framework.NotifiedRow) {
	if e.sc != nil {
		e.sc.Notified(rows)
	}
}

// DB returns a DB whose writes notify the observers.
func (e *Env) DB() *framework.DB { return e.db }

// Oracle returns the deployment's timestamp oracle, for tests that open
// another DB on it (over a wrapped store, say).
func (e *Env) Oracle() framework.Oracle { return e.ts }

// Store returns the store the deployment runs on.
func (e *Env) Store() store.Store { return e.st }

// Stats counts what happened in the deployment since Start.
type Stats struct {
	Runs      uint64 // observer transactions committed
	Skipped   uint64 // notifications processed with nothing new to do
	Failures  uint64 // observer runs that failed (and will be retried)
	Committed uint64 // transactions committed, observers' and the DB's
	Conflicts uint64 // commits that conflicted (and were run again)
}

// Stats returns the counters so far.
func (e *Env) Stats() Stats {
	ps := e.proc.Stats()
	s := Stats{Runs: ps.Runs.Load(), Skipped: ps.Skipped.Load(), Failures: ps.Failures.Load()}
	es := (*engine.DB)(e.db).Engine().Counts()
	s.Committed, s.Conflicts = es.Committed, es.Conflicts
	return s
}

// maxWaitPoll bounds WaitForObservers' pause between checks, and so how
// late it notices the end of the work. (It was 500ms, which made a
// benchmark of a phase of a third of a second measure 0.32 or 0.64 s
// depending on which side of a pause the work ended.)
const maxWaitPoll = 40 * time.Millisecond

// ErrObserverFailing is returned by WaitForObservers when an observer keeps
// failing on a notification: waiting longer would not help.
var ErrObserverFailing = errors.New("frameworktest: an observer keeps failing")

// WaitForObservers returns when no notification is pending and no
// transaction began during a final check: every observer triggered by the
// writes made before the call, directly or through a chain of observers,
// has run. It fails with ErrObserverFailing (naming the observer and its
// error) once a notification has failed three times, and with ctx's error
// when ctx ends first. It returns within about maxWaitPoll of the end of
// the work, so that a benchmark can time the work by the wait.
func (e *Env) WaitForObservers(ctx context.Context) error {
	// Each check is a scan of the notify group up to its first entry:
	// poll often when the end is near, less often while work remains.
	poll := 10 * time.Millisecond
	for {
		issued := e.ts.Issued()
		busy, err := notify.AnyPending(ctx, e.st, e.tables)
		if err != nil {
			return err
		}
		if busy {
			if err := e.failing(ctx); err != nil {
				return err
			}
			poll = min(2*poll, maxWaitPoll)
		} else {
			poll = 10 * time.Millisecond
		}
		if err := retry.Sleep(ctx, poll); err != nil {
			return e.stillPending(err)
		}
		if !busy && e.ts.Issued() == issued {
			if again, err := notify.AnyPending(ctx, e.st, e.tables); err != nil || !again {
				return err
			}
		}
	}
}

// stillPending is WaitForObservers' error when its context ended (cause):
// it counts what is left, within a few seconds of its own.
func (e *Env) stillPending(cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := notify.Pending(ctx, e.st, e.tables)
	if err != nil {
		return fmt.Errorf("frameworktest: notifications still pending: %w", cause)
	}
	return fmt.Errorf("frameworktest: %d notifications still pending: %w", n, cause)
}

// failing reports a notification whose observer failed three times.
func (e *Env) failing(ctx context.Context) error {
	fs, err := notify.Failures(ctx, e.st)
	if err != nil {
		return err
	}
	for _, f := range fs {
		if f.Attempts >= 3 {
			return fmt.Errorf("%w: %s on %s failed %d times: %s", ErrObserverFailing, f.Observer, f.Notification, f.Attempts, f.LastError)
		}
	}
	return nil
}

// StopObservers stops scanning for notifications and waits for the
// observer runs in flight; the DB and the store keep working until Close.
// It is idempotent.
func (e *Env) StopObservers() {
	e.stop()
	<-e.stopped
}

// Close stops the observers (waiting for the runs in flight) and releases
// the deployment.
func (e *Env) Close() error {
	e.StopObservers()
	return e.closeParts()
}

// EngineVariable names the environment variable that chooses the store
// Start opens when Options.Store is nil: "tikv" for a TiKV cluster in
// process, anything else for pebble in memory.
const EngineVariable = "TRICKLE_TEST_ENGINE"

// OnTiKV reports whether EngineVariable asks for TiKV.
func OnTiKV() bool { return os.Getenv(EngineVariable) == "tikv" }

// freshStore opens the store Start runs on when given none (see
// Options.Store), and what closes it.
func freshStore(log *slog.Logger) (store.Store, io.Closer, error) {
	if !OnTiKV() {
		st, err := store.Open("", framework.StoreOptions(&store.Options{FS: vfs.NewMem(), Durability: store.DurabilityNone, Logger: log}))
		return st, st, err
	}
	c, err := tikvtest.Start(nil)
	if err != nil {
		return nil, nil, err
	}
	st, err := c.OpenStore(&tikv.Options{Logger: log})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return st, closers{st, c}, nil
}

// engineOf is the engine Start runs: the one EngineVariable asks for on
// the store it opens itself, the one st declares on a store of the test's.
func engineOf(st store.Store) framework.Engine {
	switch {
	case st != nil:
		return framework.EngineDefault
	case OnTiKV():
		return framework.EngineTiKV
	}
	return framework.EngineProtocol
}

// closers closes each in turn.
type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

func (e *Env) closeParts() error {
	var errs []error
	if e.ownTs != nil {
		errs = append(errs, e.ownTs.Close())
	}
	if e.ownSt != nil {
		errs = append(errs, e.ownSt.Close())
	}
	return errors.Join(errs...)
}
