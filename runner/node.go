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
	"github.com/trickle-dev/trickle/framework/oracle"
	"github.com/trickle-dev/trickle/remote"
	"github.com/trickle-dev/trickle/store"
)

// Node is a process's connection to a deployment: the store and the oracle
// (its own, served to others, or another runner's, reached over NATS) and a
// NATS connection. Runners, the loader and admin commands all start from a
// Node.
type Node struct {
	cfg Config
	log *slog.Logger

	// Store and Oracle are what transactions use, local or remote.
	Store  store.Store
	Oracle framework.Oracle
	// Conn and JetStream reach the NATS cluster.
	Conn      *nats.Conn
	JetStream jetstream.JetStream

	owner     bool
	lock      *dirLock
	embedded  *cluster.Embedded
	local     *store.DB
	ts        *oracle.Server
	tsRemote  *remote.OracleClient
	tsClient  *oracle.Client
	storeSvc  *remote.StoreService
	oracleSvc *remote.OracleService
}

// wakeSubject is where processes announce that they committed
// notifications, so that idle runners look for them at once.
func (n *Node) wakeSubject() string { return n.cfg.Namespace + ".notified" }

// WakeRunners tells every runner of the deployment that this process just
// committed notifications, so that their idle scanners look now instead of
// at their next poll. It is a fire-and-forget NATS publish: a lost
// wake-up only costs latency. Writers that run no observers (the loader)
// pass it as framework.Options.Notified.
func (n *Node) WakeRunners() {
	if n.Conn != nil {
		_ = n.Conn.Publish(n.wakeSubject(), nil)
	}
}

// Owner reports whether this process owns the store.
func (n *Node) Owner() bool { return n.owner }

// Config returns the configuration in effect.
func (n *Node) Config() Config { return n.cfg }

// OracleStats reports how many timestamps the oracle has served and the
// latest one, wherever the oracle runs.
func (n *Node) OracleStats(ctx context.Context) (issued, current uint64, err error) {
	if n.ts != nil {
		last, _ := n.ts.Position()
		return n.ts.Issued(), last, nil
	}
	return n.tsRemote.Stats(ctx)
}

// Open connects to the deployment described by cfg, owning the data
// directory or joining its owner according to cfg.Mode.
func Open(ctx context.Context, cfg Config) (*Node, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger}
	ok := false
	defer func() {
		if !ok {
			n.Close()
		}
	}()
	if cfg.Mode != ModeClient {
		lock, err := lockDir(cfg.DataDir)
		switch {
		case err == nil:
			n.lock, n.owner = lock, true
		case errors.Is(err, errOwned) && cfg.Mode == ModeAuto:
			n.log.Info("another runner owns the data directory; joining it as a client", "dir", cfg.DataDir)
		default:
			return nil, err
		}
	}
	var err error
	if n.owner {
		err = n.openOwner(ctx)
	} else {
		err = n.openClient(ctx)
	}
	if err != nil {
		return nil, err
	}
	if n.Conn == nil { // a private owner
		ok = true
		return n, nil
	}
	if n.JetStream, err = jetstream.New(n.Conn); err != nil {
		return nil, fmt.Errorf("runner: JetStream: %w", err)
	}
	ok = true
	return n, nil
}

func (n *Node) connect(ctx context.Context, url string) error {
	o := n.cfg.NATS
	o.URLs = url
	if o.Name == "" {
		o.Name = n.cfg.WorkerID
	}
	if o.Logger == nil {
		o.Logger = n.log
	}
	nc, err := cluster.Connect(ctx, o)
	if err != nil {
		return fmt.Errorf("runner: connecting to NATS at %s: %w", url, err)
	}
	n.Conn = nc
	return nil
}

func (n *Node) openOwner(ctx context.Context) error {
	dir := n.cfg.DataDir
	st, err := store.Open(filepath.Join(dir, "store"), &store.Options{Logger: n.log})
	if err != nil {
		return err
	}
	n.local, n.Store = st, st
	if n.ts, err = oracle.NewServer(oracle.NewFilePersister(filepath.Join(dir, "oracle")), oracle.WithLogger(n.log)); err != nil {
		return err
	}
	n.Oracle = n.ts
	if tr, err := newTimedReserver(n.cfg.MeterProvider, n.ts, "local"); err != nil {
		n.log.Warn("oracle metrics unavailable", "err", err)
	} else {
		n.Oracle = tr
	}
	if n.cfg.Private {
		return nil
	}
	url := n.cfg.NATSURL
	if url == "" {
		n.embedded, err = cluster.StartEmbedded(cluster.EmbeddedOptions{Port: n.cfg.NATSPort, DataDir: filepath.Join(dir, "nats"), Logger: n.log})
		if err != nil {
			return fmt.Errorf("runner: starting the embedded NATS server: %w", err)
		}
		url = n.embedded.ClientURL()
		n.log.Info("embedded NATS server listening", "url", url)
	}
	if err := n.connect(ctx, url); err != nil {
		return err
	}
	prefix := remote.WithSubjectPrefix(n.cfg.Namespace)
	if n.storeSvc, err = remote.ServeStore(n.Conn, st, prefix, remote.WithLogger(n.log)); err != nil {
		return err
	}
	if n.oracleSvc, err = remote.ServeOracle(n.Conn, n.ts, prefix, remote.WithLogger(n.log)); err != nil {
		return err
	}
	return nil
}

// DefaultURL is where clients look for the embedded server of a runner on
// the same machine.
func (c *Config) DefaultURL() string {
	if c.NATSURL != "" {
		return c.NATSURL
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", c.NATSPort)
}

func (n *Node) openClient(ctx context.Context) error {
	if err := n.connect(ctx, n.cfg.DefaultURL()); err != nil {
		return fmt.Errorf("%w (is a runner that owns the store running?)", err)
	}
	prefix := remote.WithSubjectPrefix(n.cfg.Namespace)
	st, err := remote.NewStore(n.Conn, prefix)
	if err != nil {
		return err
	}
	n.Store = st
	if n.tsRemote, err = remote.NewOracle(n.Conn, prefix); err != nil {
		return err
	}
	// One oracle request in flight per process; concurrent callers share it.
	var reserver oracle.Reserver = n.tsRemote
	if tr, err := newTimedReserver(n.cfg.MeterProvider, n.tsRemote, "remote"); err != nil {
		n.log.Warn("oracle metrics unavailable", "err", err)
	} else {
		reserver = tr
	}
	if n.tsClient, err = oracle.NewClient(reserver); err != nil {
		return err
	}
	n.Oracle = n.tsClient
	return nil
}

// Close releases everything Open acquired, in reverse order.
func (n *Node) Close() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
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
	if !n.owner && n.Store != nil {
		add(n.Store.Close())
	}
	if n.Conn != nil {
		add(n.Conn.Drain())
	}
	if n.embedded != nil {
		n.embedded.Shutdown()
	}
	if n.ts != nil {
		add(n.ts.Close())
	}
	if n.local != nil {
		add(n.local.Close())
	}
	if n.lock != nil {
		add(n.lock.release())
	}
	return errors.Join(errs...)
}

// hostInfo describes this process for status listings.
func hostInfo() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d", host, os.Getpid())
}
