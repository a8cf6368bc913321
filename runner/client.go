package runner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/internal/retry"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/remote"
	"github.com/trickle-dev/trickle/store"
)

// clientSetup is a process that joined the owner of the data directory:
// it reaches the owner's store and oracle over NATS, having checked that
// the store is the one it expects, and every request names that store.
// When the owner dies, a client that may (see Node.canTakeOver) takes the
// directory over: it hands over to an owner of its own (handOver), and
// the handover store and oracle it hands out switch to that owner's, so
// that nothing built on the node has to be rebuilt.
type clientSetup struct {
	cfg *Deployment
	handover
	id          string
	remoteStore *remote.StoreClient
	tsRemote    *remote.OracleClient
	// tsClient draws timestamps from tsRemote in batches, one request in
	// flight per process: concurrent callers share it.
	tsClient *oracle.Client

	// mu orders a handover with stop, so that a takeover that ends after
	// the node closed closes its owner rather than leaving it open.
	mu      sync.Mutex
	stopped bool
	// owner is the owner the client handed over to; nil until then.
	owner atomic.Pointer[ownerSetup]
}

// join connects to the owner of the store as a client; with tryLock (mode
// auto) it owns the data directory instead if the directory is free. Until
// cfg.ConnectTimeout it tries again after failures that time can mend: an
// owner that is starting up has not yet made its credentials, store id or
// services, and one that just died leaves the directory to take.
func (n *Node) join(ctx context.Context, tryLock bool) (setup, error) {
	c := &clientSetup{cfg: &n.cfg}
	fail := func(err error) (setup, error) {
		c.stop() // what the attempts made
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, n.cfg.ConnectTimeout)
	defer cancel()
	for {
		if tryLock {
			lock, err := lockDir(n.cfg.DataDir)
			if err == nil {
				// Owning after all: what the attempts to join made goes.
				c.stop()
				n.hangUp()
				n.nc = nil
				return n.own(ctx, lock)
			}
			if !errors.Is(err, errOwned) {
				return fail(err)
			}
		}
		if !tryLock && n.cfg.local() {
			// Its lock held, the directory's owner may still be starting;
			// a client cannot tell, but a recorded owner known to have
			// ended is not waited for.
			if o, ok := readOwner(n.cfg.DataDir); ok && o.gone() {
				return fail(ownerGoneError(n.cfg.DataDir, o))
			}
		}
		actx, acancel := context.WithTimeout(cctx, autoAttempt)
		began := time.Now()
		url, err := n.openClient(actx, c)
		acancel()
		if err == nil {
			if tryLock {
				n.log.Info("another process owns the data directory; joined it as a client", "dir", n.cfg.DataDir, "nats", n.url)
			}
			return c, nil
		}
		if !transient(err) {
			if n.cfg.local() && errors.Is(err, cluster.ErrAuthentication) {
				return fail(n.cfg.refusedError(url, err))
			}
			return fail(err)
		}
		if cctx.Err() != nil {
			return fail(n.unreachable(ctx, url, err))
		}
		if d := time.Since(began); d < 100*time.Millisecond {
			retry.Sleep(cctx, 100*time.Millisecond-d) // a failure that came at once: do not spin
		}
	}
}

// refusedError explains a local client refused by the server it reached
// at url: every data directory has its own key, so the server is not the
// one of this data directory.
func (d *Deployment) refusedError(url string, err error) error {
	store := ""
	if id, rerr := ReadStoreID(d.DataDir); rerr == nil {
		store = " (store " + id + ")"
	}
	return fmt.Errorf("%w: the NATS server at %s refused the key of data directory %s%s, so it is not the server of that directory's runner: another deployment's, or a stale port (check -nats-port and -data): %w",
		ErrWrongStore, url, d.DataDir, store, err)
}

// ownerGoneError explains a data directory whose recorded owner is known
// to have ended (ownerInfo.gone): nothing serves it, nor will until a
// runner starts on it.
func ownerGoneError(dir string, o ownerInfo) error {
	return fmt.Errorf("runner: no runner serves the data directory %s: its last owner, pid %d, ran on this host since its last boot and is not running any more; start a runner with -data %s: %w",
		dir, o.pid, dir, store.ErrUnavailable)
}

// errNotAnnounced is a local client's failure to find where the owner of
// its data directory serves the store: no process owns the directory, or
// its owner does not serve it (yet: a runner starting up, or never: a
// loader writing into it directly).
var errNotAnnounced = errors.New("no process announced a NATS server for the data directory")

// transient reports a failure to reach the store that may pass: nothing
// answers yet, or the owner has not yet written what clients read in the
// data directory. Wrong stores and refused credentials are final.
func transient(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, errNotAnnounced)
}

// autoAttempt bounds one attempt to join an owner in join.
const autoAttempt = 2 * time.Second

// local reports whether the deployment is the one of DataDir on this
// machine: its clients find the owner's embedded server, its credentials
// and its store id there, and may take the directory over.
func (d *Deployment) local() bool { return d.NATSURL == "" && !d.onTiKV() }

// clientURL is where a client looks for the deployment: the configured
// URL, else the embedded server of the data directory's owner on this
// machine (the port configured, else the one it announced). It is "" when
// none of them names a server: a client never dials a default port, where
// another deployment's server may be listening.
func (d *Deployment) clientURL() string {
	switch {
	case d.NATSURL != "":
		return d.NATSURL
	case d.NATSPort > 0:
		return fmt.Sprintf("nats://127.0.0.1:%d", d.NATSPort)
	}
	if o, ok := readOwner(d.DataDir); ok {
		return o.url
	}
	return ""
}

// openClient connects the node to the owner's NATS server and c to the
// owner's store and oracle there, and returns the URL it tried ("" if
// nothing names one: errNotAnnounced). A failed attempt leaves what it
// made for the next one to reuse.
func (n *Node) openClient(ctx context.Context, c *clientSetup) (string, error) {
	url := n.cfg.clientURL()
	if url == "" {
		return "", fmt.Errorf("%w (%s)", errNotAnnounced, filepath.Join(n.cfg.DataDir, ownerFile))
	}
	if n.nc == nil || n.url != url {
		if n.nc != nil {
			// The clients made on the old connection go with it.
			c.closeClients()
			c.tsClient, c.tsRemote, c.remoteStore = nil, nil, nil
			n.nc.Close()
			n.nc = nil
		}
		if err := n.connect(ctx, url); err != nil {
			return url, err
		}
	}
	return url, c.open(ctx, n.nc, n.url)
}

// open makes the clients of the owner's store and oracle on nc, connected
// to url, and checks that the store is the expected one.
func (c *clientSetup) open(ctx context.Context, nc *nats.Conn, url string) error {
	opts := c.cfg.clientOptions()
	if c.remoteStore == nil {
		st, err := remote.NewStore(nc, opts)
		if err != nil {
			return err
		}
		c.remoteStore = st
	}
	if err := c.checkStore(ctx, url); err != nil {
		return err
	}
	// From now on every request names the store: if the connection ever
	// comes back to another deployment's server, or another store is
	// served behind the same subjects, requests are refused, not executed.
	c.remoteStore.Expect(c.id)
	if c.tsRemote == nil {
		var err error
		if c.tsRemote, err = remote.NewOracle(nc, opts); err != nil {
			return err
		}
		c.tsRemote.Expect(c.id)
		var reserver oracle.Reserver = c.tsRemote
		if tr, err := newTimedReserver(c.cfg.MeterProvider, c.tsRemote, "remote"); err != nil {
			c.cfg.Logger.Warn("oracle metrics unavailable", "err", err)
		} else {
			reserver = tr
		}
		if c.tsClient, err = oracle.NewClient(reserver, nil); err != nil {
			return err
		}
	}
	c.handover = newHandover(c.remoteStore, c.tsClient)
	return nil
}

// checkStore asks the store service at url which store it serves and
// compares it with the one this process expects (Deployment.StoreID, else
// for a local deployment the data directory's).
func (c *clientSetup) checkStore(ctx context.Context, url string) error {
	want := c.cfg.StoreID
	if want == "" && c.cfg.local() {
		id, err := ReadStoreID(c.cfg.DataDir)
		if err != nil {
			return err
		}
		want = id
	}
	got, where, err := c.remoteStore.Identity(ctx)
	if err != nil {
		return err
	}
	if want != "" && got != want {
		if got == "" {
			got = "(an unnamed store)"
		}
		return fmt.Errorf("%w: %s serves store %s (%s), but this process expects store %s (%s)",
			ErrWrongStore, url, got, where, want, c.expectedFrom())
	}
	c.id = got
	return nil
}

// expectedFrom says where the expected store id came from.
func (c *clientSetup) expectedFrom() string {
	if c.cfg.StoreID != "" {
		return "as configured"
	}
	return "of data directory " + absPath(c.cfg.DataDir)
}

func (c *clientSetup) storeID() string    { return c.id }
func (c *clientSetup) owned() *ownerSetup { return c.owner.Load() }

// oracleStats asks the owner's oracle, or after a takeover its own.
func (c *clientSetup) oracleStats(ctx context.Context) (issued, current uint64, err error) {
	if o := c.owned(); o != nil {
		return o.oracleStats(ctx)
	}
	return c.tsRemote.Stats(ctx)
}

// closeClients closes the clients of the owner's store and oracle.
func (c *clientSetup) closeClients() error {
	var errs []error
	if c.tsClient != nil {
		errs = append(errs, c.tsClient.Close())
	}
	if c.tsRemote != nil {
		errs = append(errs, c.tsRemote.Close())
	}
	if c.remoteStore != nil {
		errs = append(errs, c.remoteStore.Close())
	}
	return errors.Join(errs...)
}

// stop stops serving, if the client took over, and closes the clients of
// the owner's store and oracle; a takeover that ends later fails.
func (c *clientSetup) stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	var err error
	if o := c.owned(); o != nil {
		err = o.stop()
	}
	return errors.Join(err, c.closeClients())
}

// close releases the data directory and what goes with it, if the client
// took over.
func (c *clientSetup) close() error {
	if o := c.owned(); o != nil {
		return o.close()
	}
	return nil
}
