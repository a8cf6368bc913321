package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/store"
)

// Node is a process's connection to a deployment: the store and the oracle
// (its own, served to others, or another runner's, reached over NATS) and a
// NATS connection. Runners, the loader and admin commands all start from a
// Node.
//
// How the node reaches the store and the oracle, and what it holds for
// that, is its setup: it owns the data directory (ownerSetup, in
// owner.go), joined the process that does (clientSetup, client.go, which
// takes the directory over if that process dies: takeover.go), or opened
// a TiKV cluster that no process owns (tikvSetup, tikv.go). The Node
// keeps what every setup has in common.
type Node struct {
	cfg Deployment
	log *slog.Logger
	// wakeID names this process in its wake-ups (see wakeRunners).
	wakeID string

	setup setup
	// What the setup hands out, the same for the node's whole life (see
	// Store, Oracle and StoreID).
	st      store.Store
	or      framework.Oracle
	storeID string

	// The NATS connection, nil for a private owner: liveness, row locks
	// and wake-ups run on it, and all but TiKV reach or serve the store
	// on it. url is the URL it dialled.
	nc  *nats.Conn
	js  jetstream.JetStream
	url string

	live *cluster.Liveness
	// engines are the DBs opened on the node; followStop ends the loop
	// that keeps their safe point up to date (see StartLiveness).
	engines    engines
	followStop context.CancelFunc
	followDone chan struct{}
}

// setup is how a Node reaches its deployment's store and oracle, and owns
// what it needs for that, so that the Node does not have to know which
// one it is but where a caller asks (Owner, TiKV, the takeover).
type setup interface {
	// store and oracle are what the node hands out, and storeID names the
	// store: the node reads them once, when it opens.
	store() store.Store
	oracle() framework.Oracle
	storeID() string
	// owned returns the owner of the data directory this process is: the
	// setup itself, or the one a client handed over to after a takeover;
	// nil for a client that has not taken over and on TiKV.
	owned() *ownerSetup
	// oracleStats is OracleStats.
	oracleStats(ctx context.Context) (issued, current uint64, err error)
	// stop stops what the setup runs on the node's NATS connection (the
	// store and oracle services, the clients of another process's); the
	// node then closes the connection, and close releases the rest, in
	// reverse order of acquisition.
	stop() error
	close() error
}

// wakeSubject is where processes announce that they committed
// notifications, so that idle runners look for them at once.
func (n *Node) wakeSubject() string { return n.cfg.Namespace + ".notified" }

// wakeRunners tells every runner of the deployment that this process just
// committed notifications on rows (nil: too many to name), so that their
// scanners look at those rows now instead of at their next pass. It is a
// fire-and-forget NATS publish: a lost wake-up only costs latency.
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

// Conn returns the NATS connection, so that a process can use the
// deployment's NATS beside the store (exports, its own subjects); nil for
// a private owner.
func (n *Node) Conn() *nats.Conn { return n.nc }

// JetStream returns the JetStream context of Conn, for the same uses;
// nil for a private owner.
func (n *Node) JetStream() jetstream.JetStream { return n.js }

// Owner reports whether this process owns the store, since it opened or
// since it took the data directory over: only the owner collects and
// compacts a pebble store.
func (n *Node) Owner() bool { return n.setup.owned() != nil }

// Deployment returns the deployment settings in effect (defaults filled in).
func (n *Node) Deployment() Deployment { return n.cfg }

// StoreID returns the id of the store the node uses, for messages and
// status listings; see Deployment.StoreID.
func (n *Node) StoreID() string { return n.storeID }

// URL returns the NATS URL the node connected to ("" for a private owner),
// for messages.
func (n *Node) URL() string { return n.url }

// localStore returns the pebble store of an owner, nil for a client.
func (n *Node) localStore() *store.DB {
	if o := n.setup.owned(); o != nil {
		return o.db
	}
	return nil
}

// OracleStats reports how many timestamps the oracle has served and the
// latest one, wherever the oracle runs, so that status listings and the
// runner's collection schedule see the deployment's activity. With PD as
// the oracle (a TiKV store) issued is always 0 and current is a fresh
// timestamp.
func (n *Node) OracleStats(ctx context.Context) (issued, current uint64, err error) {
	return n.setup.oracleStats(ctx)
}

// Liveness returns the process's liveness registration (see
// StartLiveness), nil if it has none.
func (n *Node) Liveness() *cluster.Liveness { return n.live }

// StartLiveness registers this process as a live worker until Close.
//
// Registered under Deployment.WorkerID, the locks it leaves when it dies
// are resolved as soon as its token expires rather than after their TTL.
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
	n := &Node{cfg: cfg, log: cfg.Logger, wakeID: newWakeID()}
	ok := false
	defer func() {
		if !ok {
			n.Close()
		}
	}()
	s, err := n.open(ctx)
	if err != nil {
		return nil, err
	}
	n.setup = s
	n.st, n.or, n.storeID = s.store(), s.oracle(), s.storeID()
	if n.nc != nil {
		if n.js, err = jetstream.New(n.nc); err != nil {
			return nil, fmt.Errorf("runner: JetStream: %w", err)
		}
	}
	ok = true
	return n, nil
}

// open opens the setup cfg describes.
func (n *Node) open(ctx context.Context) (setup, error) {
	switch {
	case n.cfg.onTiKV():
		return n.openTiKV(ctx)
	case n.cfg.mode() == ModeOwner:
		lock, err := lockDir(n.cfg.DataDir)
		if err != nil {
			if errors.Is(err, errOwned) {
				err = ownedError(n.cfg.DataDir)
			}
			return nil, err
		}
		return n.own(ctx, lock)
	case n.cfg.mode() == ModeClient:
		return n.join(ctx, false)
	default:
		return n.join(ctx, true)
	}
}

// unreachable turns the failure to reach a deployment at url into an
// error that names what it tried, the URL or, when nothing named one, the
// data directory, and says what to do.
func (n *Node) unreachable(ctx context.Context, url string, err error) error {
	if errors.Is(err, ErrWrongStore) || ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	what := "no store answers on " + url
	if url == "" {
		what = "no runner serves the data directory " + n.cfg.DataDir
	}
	var hint string
	switch {
	case !n.cfg.local():
		hint = "check the URL (-nats, TRICKLE_NATS_URL) and that a runner owning the store is connected to it"
	default:
		hint = fmt.Sprintf("start a runner with -data %s, or give the port of a running one with -nats-port", n.cfg.DataDir)
		if o, ok := readOwner(n.cfg.DataDir); ok {
			hint = fmt.Sprintf("%s (data directory %s); %s", o.describe(), n.cfg.DataDir, hint)
		}
	}
	return fmt.Errorf("runner: %s (tried for %v): %s: %w", what, n.cfg.ConnectTimeout, hint, err)
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
	case n.cfg.local():
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

// connect dials the node's NATS connection to url.
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

// dial is connect bounded by cfg.ConnectTimeout, failing with an error
// that says what to do: how an owner reaches the server it serves on.
func (n *Node) dial(ctx context.Context, url string) error {
	cctx, cancel := context.WithTimeout(ctx, n.cfg.ConnectTimeout)
	defer cancel()
	if err := n.connect(cctx, url); err != nil {
		return n.unreachable(ctx, url, err)
	}
	return nil
}

// hangUp closes the node's NATS connection, if it has one, after what
// was sent on it is flushed.
func (n *Node) hangUp() error {
	if n.nc == nil {
		return nil
	}
	if n.nc.IsConnected() {
		return n.nc.Drain()
	}
	n.nc.Close()
	return nil
}

// Close releases everything Open acquired, in reverse order.
func (n *Node) Close() error {
	var errs []error
	if n.followStop != nil {
		n.followStop()
		<-n.followDone
	}
	if n.live != nil {
		errs = append(errs, n.live.Close())
	}
	if n.setup != nil {
		errs = append(errs, n.setup.stop())
	}
	errs = append(errs, n.hangUp())
	if n.setup != nil {
		errs = append(errs, n.setup.close())
	}
	return errors.Join(errs...)
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// hostInfo describes this process for status listings.
func hostInfo() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d", host, os.Getpid())
}
