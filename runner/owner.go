package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	o := &ownerSetup{lock: lock}
	defer func() {
		if err != nil {
			o.close()
		}
	}()
	if err := n.openLocal(o); err != nil {
		return nil, err
	}
	o.handover = newHandover(o.db, o.timed)
	if n.cfg.Private {
		return o, nil
	}
	url := n.cfg.NATSURL
	if url == "" {
		if o.embedded, err = n.startEmbedded(port); err != nil {
			return nil, err
		}
		url = o.embedded.ClientURL()
	}
	if err := reach(ctx, url); err != nil {
		return nil, err
	}
	if err := n.serve(o); err != nil {
		return nil, err
	}
	return o, nil
}

// openLocal opens the store and the oracle of the data directory for o.
// The store must be the one the node was using, if it was using one (a
// takeover), and the configured one, if any.
func (n *Node) openLocal(o *ownerSetup) error {
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
	o.db, o.ts, o.id = db, ts, id
	o.timed = n.localOracle(ts)
	return nil
}

// localOracle is the owner's oracle, timed for the metrics if it can be.
func (n *Node) localOracle(ts *oracle.Server) framework.Oracle {
	tr, err := newTimedReserver(n.cfg.MeterProvider, ts, "local")
	if err != nil {
		n.log.Warn("oracle metrics unavailable", "err", err)
		return ts
	}
	return tr
}

// startEmbedded starts the embedded NATS server on port, closed to anyone
// without the data directory's credentials.
func (n *Node) startEmbedded(port int) (*cluster.Embedded, error) {
	o := cluster.EmbeddedOptions{Port: port, DataDir: filepath.Join(n.cfg.DataDir, "nats"), Logger: n.log}
	if err := embeddedCredentials(&o, n.cfg.DataDir); err != nil {
		return nil, err
	}
	e, err := cluster.StartEmbedded(o)
	if err != nil {
		return nil, fmt.Errorf("runner: starting the embedded NATS server: %w", err)
	}
	n.log.Info("embedded NATS server listening", "url", e.ClientURL())
	return e, nil
}

// serve serves o's store and oracle on the node's connection and
// announces where in the lock file, for the clients on this machine.
func (n *Node) serve(o *ownerSetup) error {
	host, _ := os.Hostname()
	opts := &remote.ServiceOptions{SubjectPrefix: n.cfg.Namespace, Logger: n.log,
		StoreID: o.id, StoreWhere: host + ":" + absPath(n.cfg.DataDir)}
	// The store service draws the timestamps of reads that ask it to
	// from the oracle served beside it: the one every client uses.
	stOpts := *opts
	stOpts.Oracle = o.ts
	st, err := remote.ServeStore(n.nc, o.db, &stOpts)
	if err != nil {
		return err
	}
	ts, err := remote.ServeOracle(n.nc, o.ts, opts)
	if err != nil {
		st.Stop()
		return err
	}
	o.storeSvc, o.oracleSvc = st, ts
	return o.lock.announce(n.url)
}

// ownedError explains why an owner cannot take the data directory.
func (n *Node) ownedError() error {
	msg := fmt.Sprintf("runner: another process owns the data directory %s", n.cfg.DataDir)
	if o, ok := readOwner(n.cfg.DataDir); ok {
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
