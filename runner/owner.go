package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/remote"
	"github.com/trickle-dev/trickle/store"
)

// ownerSetup is a process that owns the data directory: it holds the
// directory's lock and opened the pebble store and the timestamp oracle
// kept there, which nobody else may open. Unless it is private, it also
// serves them over NATS to the deployment's other processes, on an
// embedded server of its own or on the configured one, and announces
// where in the lock file. A node opens as one (Open), and a client hands
// over to one when the owner it joined dies (see Node.takeOver).
type ownerSetup struct {
	cfg *Deployment
	// handover is what a node that opened as the owner hands out; after a
	// takeover the client's handover moves to db and timed instead.
	handover
	lock *dirLock
	db   *store.DB
	ts   *oracle.Server
	// timed is ts measured for the metrics: the oracle transactions use.
	timed framework.Oracle
	id    string

	// What a serving owner adds, nil for a private one. embedded is nil
	// too when the deployment names its NATS server.
	embedded  *cluster.Embedded
	storeSvc  *remote.StoreService
	oracleSvc *remote.OracleService
}

// own opens the node as the owner of the data directory, whose lock it
// holds, serving on the configured port (the default one if none).
func (n *Node) own(ctx context.Context, lock *dirLock) (setup, error) {
	port := n.cfg.NATSPort
	if port == 0 {
		port = cluster.DefaultPort
	}
	o, err := n.openOwner(ctx, lock, port, n.dial)
	if err != nil {
		return nil, err
	}
	return o, nil
}

// openOwner opens the store and the oracle of the data directory, whose
// lock it holds (and releases if it fails), and unless the node is
// private serves them over NATS: on the configured server, else on an
// embedded one listening on port, which reach connects the node to. Open
// dials the server (Node.dial); a takeover has the connection that was
// the client's reconnect to it (Node.reconnect).
func (n *Node) openOwner(ctx context.Context, lock *dirLock, port int, reach func(ctx context.Context, url string) error) (_ *ownerSetup, err error) {
	o := &ownerSetup{cfg: &n.cfg, lock: lock}
	defer func() {
		if err != nil {
			o.close()
		}
	}()
	if err := o.openLocal(n.storeID); err != nil {
		return nil, err
	}
	o.handover = newHandover(o.db, o.timed)
	if n.cfg.Private {
		return o, nil
	}
	url := n.cfg.NATSURL
	if url == "" {
		if err := o.startEmbedded(port); err != nil {
			return nil, err
		}
		url = o.embedded.ClientURL()
	}
	if err := reach(ctx, url); err != nil {
		return nil, err
	}
	if err := o.serve(n.nc, n.url); err != nil {
		return nil, err
	}
	return o, nil
}

// openLocal opens the store and the oracle of the data directory. The
// store must be expect, the one the process was using if it was using
// one (a takeover), and the configured one, if any.
func (o *ownerSetup) openLocal(expect string) error {
	dir, log := o.cfg.DataDir, o.cfg.Logger
	id, err := loadOrCreateStoreID(dir)
	if err != nil {
		return err
	}
	if expect != "" && id != expect {
		return fmt.Errorf("%w: %s holds store %s, but this process was using store %s", ErrWrongStore, dir, id, expect)
	}
	if o.cfg.StoreID != "" && id != o.cfg.StoreID {
		return fmt.Errorf("%w: %s holds store %s, not %s", ErrWrongStore, dir, id, o.cfg.StoreID)
	}
	db, err := store.Open(filepath.Join(dir, "store"), protocol.StoreOptions(&store.Options{Logger: log, CacheSize: o.cfg.StoreCacheSize}))
	if err != nil {
		return err
	}
	ts, err := oracle.NewServer(oracle.NewFilePersister(filepath.Join(dir, "oracle")), &oracle.ServerOptions{Logger: log})
	if err != nil {
		db.Close()
		return err
	}
	o.db, o.ts, o.id = db, ts, id
	o.timed = o.localOracle()
	return nil
}

// localOracle is the owner's oracle, timed for the metrics if it can be.
func (o *ownerSetup) localOracle() framework.Oracle {
	tr, err := newTimedReserver(o.cfg.MeterProvider, o.ts, "local")
	if err != nil {
		o.cfg.Logger.Warn("oracle metrics unavailable", "err", err)
		return o.ts
	}
	return tr
}

// startEmbedded starts the embedded NATS server on port, closed to anyone
// without the data directory's credentials.
func (o *ownerSetup) startEmbedded(port int) error {
	opts := cluster.EmbeddedOptions{Port: port, DataDir: filepath.Join(o.cfg.DataDir, "nats"), Logger: o.cfg.Logger}
	if err := embeddedCredentials(&opts, o.cfg.DataDir); err != nil {
		return err
	}
	e, err := cluster.StartEmbedded(opts)
	if err != nil {
		return fmt.Errorf("runner: starting the embedded NATS server: %w", err)
	}
	o.embedded = e
	o.cfg.Logger.Info("embedded NATS server listening", "url", e.ClientURL())
	return nil
}

// serve serves the store and the oracle on nc, connected to url, and
// announces url in the lock file, for the clients on this machine.
func (o *ownerSetup) serve(nc *nats.Conn, url string) error {
	host, _ := os.Hostname()
	opts := &remote.ServiceOptions{SubjectPrefix: o.cfg.Namespace, Logger: o.cfg.Logger,
		StoreID: o.id, StoreWhere: host + ":" + absPath(o.cfg.DataDir)}
	// The store service draws the timestamps of reads that ask it to
	// from the oracle served beside it: the one every client uses.
	stOpts := *opts
	stOpts.Oracle = o.ts
	st, err := remote.ServeStore(nc, o.db, &stOpts)
	if err != nil {
		return err
	}
	ts, err := remote.ServeOracle(nc, o.ts, opts)
	if err != nil {
		st.Stop()
		return err
	}
	o.storeSvc, o.oracleSvc = st, ts
	return o.lock.announce(url)
}

// ownedError explains why an owner cannot take the data directory dir.
func ownedError(dir string) error {
	msg := fmt.Sprintf("runner: another process owns the data directory %s", dir)
	if o, ok := readOwner(dir); ok {
		msg += ": " + o.describe()
	}
	return fmt.Errorf("%w (%s)", errOwned, msg)
}

func (o *ownerSetup) storeID() string    { return o.id }
func (o *ownerSetup) owned() *ownerSetup { return o }

func (o *ownerSetup) oracleStats(context.Context) (issued, current uint64, err error) {
	last, _ := o.ts.Position()
	return o.ts.Issued(), last, nil
}

// stop stops serving the store and the oracle; it may be called again.
func (o *ownerSetup) stop() error {
	var errs []error
	if o.storeSvc != nil {
		errs = append(errs, o.storeSvc.Stop())
		o.storeSvc = nil
	}
	if o.oracleSvc != nil {
		errs = append(errs, o.oracleSvc.Stop())
		o.oracleSvc = nil
	}
	return errors.Join(errs...)
}

// close stops serving, shuts the embedded server down, closes the oracle
// and the store and releases the data directory, whatever of it o got
// to hold.
func (o *ownerSetup) close() error {
	errs := []error{o.stop()}
	if o.embedded != nil {
		o.embedded.Shutdown()
	}
	if o.ts != nil {
		errs = append(errs, o.ts.Close())
	}
	if o.db != nil {
		errs = append(errs, o.db.Close())
	}
	if o.lock != nil {
		errs = append(errs, o.lock.release())
	}
	return errors.Join(errs...)
}
