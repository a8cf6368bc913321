package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/internal/retry"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/remote"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv"
)

// Node is a process's connection to a deployment: the store and the oracle
// (its own, served to others, or another runner's, reached over NATS) and a
// NATS connection. Runners, the loader and admin commands all start from a
// Node.
type Node struct {
	cfg Deployment
	log *slog.Logger
	// wakeID names this process in its wake-ups (see WakeRunners).
	wakeID string

	st store.Store
	or framework.Oracle
	nc *nats.Conn
	js jetstream.JetStream

	storeID   string // the id of the store this node uses
	url       string // the NATS URL this node dialled; "" for a private owner
	local     bool   // the deployment is the one of DataDir on this machine
	handStore *handoverStore
	handOrc   *handoverOracle
	owner     atomic.Bool

	// mu guards what an owner holds, set by Open or by a takeover.
	mu        sync.Mutex
	lock      *dirLock
	embedded  *cluster.Embedded
	db        *store.DB
	ts        *oracle.Server
	storeSvc  *remote.StoreService
	oracleSvc *remote.OracleService

	// What a client holds (kept after a takeover, closed with the node).
	remoteStore *remote.StoreClient
	tsRemote    *remote.OracleClient
	tsClient    *oracle.Client

	live *cluster.Liveness
	// engines are the DBs opened on the node; followStop ends the loop
	// that keeps their safe point up to date (see StartLiveness).
	engines    engines
	followStop context.CancelFunc
	followDone chan struct{}

	tikv *tikv.Store // the deployment's TiKV store; nil on pebble
}

// wakeSubject is where processes announce that they committed
// notifications, so that idle runners look for them at once.
func (n *Node) wakeSubject() string { return n.cfg.Namespace + ".notified" }

// WakeRunners tells every runner of the deployment that this process just
// committed notifications, so that their scanners look for them now
// instead of at their next pass. It is a fire-and-forget NATS publish: a
// lost wake-up only costs latency. (The DBs a Node opens name the rows
// their commits notified, which costs the runners less than a pass.)
func (n *Node) WakeRunners() { n.wakeRunners(nil) }

// wakeRunners is WakeRunners naming the rows notified (nil: too many to
// name), so that the runners look at those rows rather than everywhere.
func (n *Node) wakeRunners(rows []framework.NotifiedRow) {
	if n.nc != nil {
		_ = n.nc.PublishMsg(n.wakeMsg(rows))
	}
}

// Store returns the store transactions use, the process's own or another
// one's over NATS. It keeps working across a takeover (see Runner): what
// is behind it changes, it does not.
func (n *Node) Store() store.Store { return n.st }

// Oracle returns where transactions draw timestamps, local or remote; like
// Store it survives a takeover.
func (n *Node) Oracle() framework.Oracle { return n.or }

// Conn returns the NATS connection; nil for a private owner.
func (n *Node) Conn() *nats.Conn { return n.nc }

// JetStream returns the JetStream context of Conn; nil for a private
// owner.
func (n *Node) JetStream() jetstream.JetStream { return n.js }

// Owner reports whether this process owns the store.
func (n *Node) Owner() bool { return n.owner.Load() }

// Deployment returns the deployment settings in effect (defaults filled in).
func (n *Node) Deployment() Deployment { return n.cfg }

// StoreID returns the id of the store the node uses; see Config.StoreID.
func (n *Node) StoreID() string { return n.storeID }

// URL returns the NATS URL the node connected to ("" for a private owner),
// for messages.
func (n *Node) URL() string { return n.url }

// localStore returns the pebble store of an owner, nil for a client.
func (n *Node) localStore() *store.DB {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.db
}

// OracleStats reports how many timestamps the oracle has served and the
// latest one, wherever the oracle runs. With PD as the oracle (a TiKV
// store) issued is always 0 and current is a fresh timestamp.
func (n *Node) OracleStats(ctx context.Context) (issued, current uint64, err error) {
	n.mu.Lock()
	ts := n.ts
	n.mu.Unlock()
	if ts != nil {
		last, _ := ts.Position()
		return ts.Issued(), last, nil
	}
	if n.tikv != nil {
		// PD serves every process and counts for none of them: the latest
		// timestamp is all there is to report.
		now, err := n.or.Timestamp(ctx)
		return 0, now, err
	}
	return n.tsRemote.Stats(ctx)
}

// Liveness returns the process's liveness registration (see
// StartLiveness), nil if it has none.
func (n *Node) Liveness() *cluster.Liveness { return n.live }

// StartLiveness registers this process as a live worker under
// Config.WorkerID until Close, so that locks it leaves when it dies are
// resolved as soon as its token expires rather than after their TTL.
// Processes that write (runners, loaders) call it; read-only tools do not,
// and so do not show in the list of workers.
//
// The token also reports the oldest transaction running in the DBs the
// node opens, so that garbage collection does not pass it, and the node
// keeps those DBs' safe point up to the one collections persist.
// OpenDB calls it when the process has not. A second call does nothing.
func (n *Node) StartLiveness(ctx context.Context, info string) error {
	return n.startLiveness(ctx, info, false)
}

// startLiveness is StartLiveness; scans says that the process runs
// scanners (a runner), which other runners see in its token (see
// rowLocks).
func (n *Node) startLiveness(ctx context.Context, info string, scans bool) error {
	if n.js == nil || n.live != nil {
		return nil // a private owner: nobody else can see its locks
	}
	live, err := cluster.NewLiveness(context.WithoutCancel(ctx), n.js, n.cfg.WorkerID, cluster.LivenessOptions{
		Bucket: n.cfg.Namespace + "_workers", TTL: n.cfg.LivenessTTL, Info: info, Logger: n.log,
		OldestActive: n.engines.oldestActive, Scans: scans,
		// A collection may have passed the transactions of a process
		// whose token lapsed: it adopts the safe point persisted since
		// before it says it is alive again.
		OnLapse: n.engines.adoptSafePoint,
	})
	if err != nil {
		return fmt.Errorf("runner: liveness: %w", err)
	}
	n.live = live
	fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	n.followStop, n.followDone = stop, make(chan struct{})
	go func() {
		defer close(n.followDone)
		n.followSafePoint(fctx, n.cfg.LivenessTTL/3)
	}()
	return nil
}

// Open connects to the deployment described by cfg, owning the data
// directory or joining its owner according to cfg.Mode. Reaching the
// deployment is bounded by cfg.ConnectTimeout: when nothing answers, Open
// fails with an error naming the NATS URL it tried and what to do.
func Open(ctx context.Context, cfg Deployment) (*Node, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger, local: cfg.NATSURL == "" && !cfg.onTiKV(), wakeID: newWakeID()}
	ok := false
	defer func() {
		if !ok {
			n.Close()
		}
	}()
	var err error
	switch {
	case cfg.onTiKV():
		err = n.openTiKV(ctx)
	case cfg.mode() == ModeOwner:
		var lock *dirLock
		if lock, err = lockDir(cfg.DataDir); err != nil {
			if errors.Is(err, errOwned) {
				err = n.ownedError()
			}
			return nil, err
		}
		err = n.openOwner(ctx, lock)
	case cfg.mode() == ModeClient:
		err = n.join(ctx, false)
	default:
		err = n.join(ctx, true)
	}
	if err != nil {
		return nil, err
	}
	if n.nc != nil {
		if n.js, err = jetstream.New(n.nc); err != nil {
			return nil, fmt.Errorf("runner: JetStream: %w", err)
		}
	}
	ok = true
	return n, nil
}

// join connects to the owner of the store as a client; with tryLock (mode
// auto) it owns the data directory instead if the directory is free. Until
// cfg.ConnectTimeout it tries again after failures that time can mend: an
// owner that is starting up has not yet made its credentials, store id or
// services, and one that just died leaves the directory to take.
func (n *Node) join(ctx context.Context, tryLock bool) error {
	cctx, cancel := context.WithTimeout(ctx, n.cfg.ConnectTimeout)
	defer cancel()
	for {
		if tryLock {
			lock, err := lockDir(n.cfg.DataDir)
			if err == nil {
				return n.openOwner(ctx, lock)
			}
			if !errors.Is(err, errOwned) {
				return err
			}
		}
		actx, acancel := context.WithTimeout(cctx, autoAttempt)
		began := time.Now()
		err := n.openClient(actx)
		acancel()
		if err == nil {
			if tryLock {
				n.log.Info("another process owns the data directory; joined it as a client", "dir", n.cfg.DataDir, "nats", n.url)
			}
			return nil
		}
		if !transient(err) {
			if n.local && errors.Is(err, cluster.ErrAuthentication) {
				return n.refusedError(err)
			}
			return err
		}
		if cctx.Err() != nil {
			return n.unreachable(ctx, err)
		}
		if d := time.Since(began); d < 100*time.Millisecond {
			retry.Sleep(cctx, 100*time.Millisecond-d) // a failure that came at once: do not spin
		}
	}
}

// refusedError explains a local client refused by the server it reached:
// every data directory has its own key, so the server is not the one of
// this data directory.
func (n *Node) refusedError(err error) error {
	store := ""
	if id, rerr := ReadStoreID(n.cfg.DataDir); rerr == nil {
		store = " (store " + id + ")"
	}
	return fmt.Errorf("%w: the NATS server at %s refused the key of data directory %s%s, so it is not the server of that directory's runner: another deployment's, or a stale port (check -nats-port and -data): %w",
		ErrWrongStore, n.url, n.cfg.DataDir, store, err)
}

// transient reports a failure to reach the store that may pass: nothing
// answers yet, or the owner has not yet written what clients read in the
// data directory. Wrong stores and refused credentials are final.
func transient(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, fs.ErrNotExist)
}

// autoAttempt bounds one attempt to join an owner in openAuto.
const autoAttempt = 2 * time.Second

// ownedError explains why an owner cannot take the data directory.
func (n *Node) ownedError() error {
	msg := fmt.Sprintf("runner: another process owns the data directory %s", n.cfg.DataDir)
	if o, ok := readOwner(n.cfg.DataDir); ok {
		msg += ": " + o.describe()
	}
	return fmt.Errorf("%w (%s)", errOwned, msg)
}

// unreachable turns the failure to reach a deployment into an error that
// names the URL tried and says what to do.
func (n *Node) unreachable(ctx context.Context, err error) error {
	if errors.Is(err, ErrWrongStore) || ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	url := n.url
	if url == "" {
		url, _ = n.cfg.clientURL()
	}
	var hint string
	switch {
	case !n.local:
		hint = "check the URL (-nats, TRICKLE_NATS_URL) and that a runner owning the store is connected to it"
	default:
		hint = fmt.Sprintf("start a runner with -data %s, or give the port of a running one with -nats-port", n.cfg.DataDir)
		if o, ok := readOwner(n.cfg.DataDir); ok {
			hint = fmt.Sprintf("%s of %s; %s", o.describe(), n.cfg.DataDir, hint)
		}
	}
	return fmt.Errorf("runner: no store answers on %s (tried for %v): %s: %w", url, n.cfg.ConnectTimeout, hint, err)
}

// connectOptions returns the options to reach the NATS server at url: the
// configured ones, plus for the embedded server of a local owner the
// credentials kept in the data directory.
func (n *Node) connectOptions(url string) (cluster.ConnectOptions, error) {
	o := n.cfg.NATS
	o.URLs = url
	if o.Name == "" {
		o.Name = n.cfg.WorkerID
	}
	if o.Logger == nil {
		o.Logger = n.log
	}
	switch {
	case n.local:
		if err := localCredentials(&o, n.cfg.DataDir); err != nil {
			return o, err
		}
	case o.CredsFile == "" && o.NKeySeedFile == "" && o.User == "" && o.Token == "":
		// No credentials for the URL: those of the data directory, if it
		// has any, as for the embedded server of a runner on this machine
		// reached by its URL.
		if c, err := cluster.ReadLocalCredentials(n.cfg.DataDir); err == nil {
			o.NKeySeedFile = c.SeedFile
		}
	}
	return o, nil
}

func (n *Node) connect(ctx context.Context, url string) error {
	o, err := n.connectOptions(url)
	if err != nil {
		return err
	}
	nc, err := cluster.Connect(ctx, o)
	if err != nil {
		return fmt.Errorf("runner: connecting to NATS at %s: %w", url, err)
	}
	n.nc, n.url = nc, url
	return nil
}

// openOwner opens the store and the oracle in the data directory, whose
// lock it holds, and unless the node is private serves them over NATS.
func (n *Node) openOwner(ctx context.Context, lock *dirLock) error {
	n.mu.Lock()
	n.lock = lock
	n.mu.Unlock()
	if err := n.openLocal(); err != nil {
		return err
	}
	n.handStore, n.handOrc = newHandoverStore(n.db), newHandoverOracle(n.localOracle())
	n.st, n.or = n.handStore, n.handOrc
	n.owner.Store(true)
	if n.cfg.Private {
		return nil
	}
	url := n.cfg.NATSURL
	if url == "" {
		port := n.cfg.NATSPort
		if port == 0 {
			port = cluster.DefaultPort
		}
		if err := n.startEmbedded(port); err != nil {
			return err
		}
		url = n.embedded.ClientURL()
	}
	cctx, cancel := context.WithTimeout(ctx, n.cfg.ConnectTimeout)
	defer cancel()
	if err := n.connect(cctx, url); err != nil {
		return n.unreachable(ctx, err)
	}
	return n.serve()
}

// openLocal opens the store and the oracle of the data directory.
func (n *Node) openLocal() error {
	dir := n.cfg.DataDir
	id, err := loadOrCreateStoreID(dir)
	if err != nil {
		return err
	}
	if n.storeID != "" && id != n.storeID {
		return fmt.Errorf("%w: %s holds store %s, but this process was using store %s", ErrWrongStore, dir, id, n.storeID)
	}
	if n.cfg.StoreID != "" && id != n.cfg.StoreID {
		return fmt.Errorf("%w: %s holds store %s, not %s", ErrWrongStore, dir, id, n.cfg.StoreID)
	}
	db, err := store.Open(filepath.Join(dir, "store"), protocol.StoreOptions(&store.Options{Logger: n.log, CacheSize: n.cfg.StoreCacheSize}))
	if err != nil {
		return err
	}
	ts, err := oracle.NewServer(oracle.NewFilePersister(filepath.Join(dir, "oracle")), &oracle.ServerOptions{Logger: n.log})
	if err != nil {
		db.Close()
		return err
	}
	n.mu.Lock()
	n.db, n.ts = db, ts
	n.mu.Unlock()
	n.storeID = id
	return nil
}

// localOracle is the owner's oracle, timed for the metrics if it can be.
func (n *Node) localOracle() framework.Oracle {
	tr, err := newTimedReserver(n.cfg.MeterProvider, n.ts, "local")
	if err != nil {
		n.log.Warn("oracle metrics unavailable", "err", err)
		return n.ts
	}
	return tr
}

// startEmbedded starts the embedded NATS server on port, closed to anyone
// without the data directory's credentials.
func (n *Node) startEmbedded(port int) error {
	o := cluster.EmbeddedOptions{Port: port, DataDir: filepath.Join(n.cfg.DataDir, "nats"), Logger: n.log}
	if err := embeddedCredentials(&o, n.cfg.DataDir); err != nil {
		return err
	}
	e, err := cluster.StartEmbedded(o)
	if err != nil {
		return fmt.Errorf("runner: starting the embedded NATS server: %w", err)
	}
	n.mu.Lock()
	n.embedded = e
	n.mu.Unlock()
	n.log.Info("embedded NATS server listening", "url", e.ClientURL())
	return nil
}

// serve serves the owner's store and oracle on n.nc and announces where.
func (n *Node) serve() error {
	host, _ := os.Hostname()
	opts := &remote.ServiceOptions{SubjectPrefix: n.cfg.Namespace, Logger: n.log,
		StoreID: n.storeID, StoreWhere: host + ":" + absPath(n.cfg.DataDir)}
	// The store service draws the timestamps of reads that ask it to
	// from the oracle served beside it: the one every client uses.
	stOpts := *opts
	stOpts.Oracle = n.ts
	st, err := remote.ServeStore(n.nc, n.db, &stOpts)
	if err != nil {
		return err
	}
	ts, err := remote.ServeOracle(n.nc, n.ts, opts)
	if err != nil {
		st.Stop()
		return err
	}
	n.mu.Lock()
	n.storeSvc, n.oracleSvc = st, ts
	lock := n.lock
	n.mu.Unlock()
	return lock.announce(n.url)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// clientURL is where a client looks for the deployment: the configured
// URL, else the embedded server of the data directory's owner on this
// machine (the port configured, else the one it announced, else the
// default). announced reports the second-to-last case.
func (c *Deployment) clientURL() (url string, announced bool) {
	switch {
	case c.NATSURL != "":
		return c.NATSURL, false
	case c.NATSPort > 0:
		return fmt.Sprintf("nats://127.0.0.1:%d", c.NATSPort), false
	}
	if o, ok := readOwner(c.DataDir); ok && o.url != "" {
		return o.url, true
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", cluster.DefaultPort), false
}

// openClient connects to the owner's store and oracle over NATS and checks
// that the store is the expected one.
func (n *Node) openClient(ctx context.Context) error {
	url, _ := n.cfg.clientURL()
	if n.nc == nil || n.url != url {
		if n.nc != nil {
			n.nc.Close()
			n.nc = nil
		}
		if err := n.connect(ctx, url); err != nil {
			return err
		}
	}
	opts := n.cfg.clientOptions()
	if n.remoteStore == nil {
		st, err := remote.NewStore(n.nc, opts)
		if err != nil {
			return err
		}
		n.remoteStore = st
	}
	if err := n.checkStore(ctx); err != nil {
		return err
	}
	// From now on every request names the store: if the connection ever
	// comes back to another deployment's server, or another store is
	// served behind the same subjects, requests are refused, not executed.
	n.remoteStore.Expect(n.storeID)
	if n.tsRemote == nil {
		var err error
		if n.tsRemote, err = remote.NewOracle(n.nc, opts); err != nil {
			return err
		}
		n.tsRemote.Expect(n.storeID)
		// One oracle request in flight per process; concurrent callers
		// share it.
		var reserver oracle.Reserver = n.tsRemote
		if tr, err := newTimedReserver(n.cfg.MeterProvider, n.tsRemote, "remote"); err != nil {
			n.log.Warn("oracle metrics unavailable", "err", err)
		} else {
			reserver = tr
		}
		if n.tsClient, err = oracle.NewClient(reserver, nil); err != nil {
			return err
		}
	}
	n.handStore, n.handOrc = newHandoverStore(n.remoteStore), newHandoverOracle(n.tsClient)
	n.st, n.or = n.handStore, n.handOrc
	return nil
}

// checkStore asks the store service which store it serves and compares it
// with the one this node expects (Config.StoreID, else for a local
// deployment the data directory's).
func (n *Node) checkStore(ctx context.Context) error {
	want := n.cfg.StoreID
	if want == "" && n.local {
		id, err := ReadStoreID(n.cfg.DataDir)
		if err != nil {
			return err
		}
		want = id
	}
	got, where, err := n.remoteStore.Identity(ctx)
	if err != nil {
		return err
	}
	if want != "" && got != want {
		if got == "" {
			got = "(an unnamed store)"
		}
		return fmt.Errorf("%w: %s serves store %s (%s), but this process expects store %s (%s)",
			ErrWrongStore, n.url, got, where, want, n.expectedFrom())
	}
	n.storeID = got
	return nil
}

// expectedFrom says where the expected store id came from.
func (n *Node) expectedFrom() string {
	if n.cfg.StoreID != "" {
		return "as configured"
	}
	return "of data directory " + absPath(n.cfg.DataDir)
}

// Close releases everything Open acquired, in reverse order.
func (n *Node) Close() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if n.followStop != nil {
		n.followStop()
		<-n.followDone
	}
	if n.live != nil {
		add(n.live.Close())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.storeSvc != nil {
		add(n.storeSvc.Stop())
	}
	if n.oracleSvc != nil {
		add(n.oracleSvc.Stop())
	}
	if n.tsClient != nil {
		add(n.tsClient.Close())
	}
	if n.tsRemote != nil {
		add(n.tsRemote.Close())
	}
	if n.remoteStore != nil {
		add(n.remoteStore.Close())
	}
	if n.nc != nil {
		if n.nc.IsConnected() {
			add(n.nc.Drain())
		} else {
			n.nc.Close()
		}
	}
	if n.embedded != nil {
		n.embedded.Shutdown()
	}
	if n.ts != nil {
		add(n.ts.Close())
	}
	if n.db != nil {
		add(n.db.Close())
	}
	if n.lock != nil {
		add(n.lock.release())
	}
	if n.tikv != nil {
		add(n.tikv.Close())
	}
	return errors.Join(errs...)
}

// hostInfo describes this process for status listings.
func hostInfo() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d", host, os.Getpid())
}
