package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/internal/retry"
)

// takeOverPoll is how often a runner that joined an owner on its machine
// checks whether the owner is gone.
const takeOverPoll = time.Second

// canTakeOver reports whether the node may take the data directory over
// when its owner dies: a runner that joined the owner of its data directory
// on this machine, not one pointed at a NATS URL or told to stay a client.
func (n *Node) canTakeOver() bool {
	return !n.Owner() && n.cfg.Mode == ModeAuto && n.local && !n.cfg.Private
}

// takeOver makes this node the owner of its data directory if the
// directory's lock is free, which it is once the owner's process has ended
// (the kernel releases the lock of a killed process). It opens the store
// and the oracle, starts the embedded NATS server on the port the old owner
// served on, so that every client's connection reconnects to it by itself,
// serves the store and the oracle there, and switches the node's Store and
// Oracle over to its own. It reports whether it took over.
func (n *Node) takeOver(ctx context.Context) (bool, error) {
	lock, err := lockDir(n.cfg.DataDir)
	if errors.Is(err, errOwned) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	ok := false
	defer func() {
		if !ok {
			n.releaseOwnership()
		}
	}()
	n.mu.Lock()
	n.lock = lock
	n.mu.Unlock()
	n.log.Warn("the owner of the data directory is gone; taking it over", "dir", n.cfg.DataDir, "nats", n.url)
	if err := n.openLocal(); err != nil {
		return false, err
	}
	port, err := urlPort(n.url)
	if err != nil {
		return false, err
	}
	if err := n.startEmbedded(port); err != nil {
		return false, err
	}
	// The connection is retrying the old server with backoff; have it try
	// the new one now.
	if err := n.nc.ForceReconnect(); err != nil {
		return false, fmt.Errorf("runner: reconnecting to the new embedded server: %w", err)
	}
	deadline := time.Now().Add(n.cfg.ConnectTimeout)
	for !n.nc.IsConnected() {
		if time.Now().After(deadline) {
			return false, fmt.Errorf("runner: not reconnected to the new embedded server on %s within %v", n.url, n.cfg.ConnectTimeout)
		}
		if err := retry.Sleep(ctx, 20*time.Millisecond); err != nil {
			return false, err
		}
	}
	if err := n.serve(); err != nil {
		return false, err
	}
	n.handStore.set(n.db)
	n.handOrc.set(n.localOracle())
	n.owner.Store(true)
	ok = true
	n.log.Warn("took over the data directory: serving the store and the oracle", "dir", n.cfg.DataDir, "nats", n.url)
	return true, nil
}

// releaseOwnership undoes a takeover that failed halfway, leaving the node
// a client and the directory free for another attempt.
func (n *Node) releaseOwnership() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.storeSvc != nil {
		n.storeSvc.Stop()
		n.storeSvc = nil
	}
	if n.oracleSvc != nil {
		n.oracleSvc.Stop()
		n.oracleSvc = nil
	}
	if n.embedded != nil {
		n.embedded.Shutdown()
		n.embedded = nil
	}
	if n.ts != nil {
		n.ts.Close()
		n.ts = nil
	}
	if n.db != nil {
		n.db.Close()
		n.db = nil
	}
	if n.lock != nil {
		n.lock.release()
		n.lock = nil
	}
}

// urlPort returns the port of a nats:// URL.
func urlPort(raw string) (int, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return 0, fmt.Errorf("runner: NATS URL %q: %w", raw, err)
	}
	_, p, err := net.SplitHostPort(u.Host)
	if err != nil {
		return cluster.DefaultPort, nil
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return 0, fmt.Errorf("runner: NATS URL %q: bad port", raw)
	}
	return port, nil
}
