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
	c, ok := n.setup.(*clientSetup)
	return ok && c.owned() == nil && n.cfg.Mode == ModeAuto && n.cfg.local() && !n.cfg.Private
}

// takeOver makes this client node the owner of its data directory if the
// directory's lock is free, which it is once the owner's process has ended
// (the kernel releases the lock of a killed process). It opens an owner
// the way Open does, but with its embedded NATS server on the port the old
// owner served on, so that every client's connection reconnects to it by
// itself, this node's first; the client then hands over to that owner:
// the node's Store and Oracle switch to the owner's. It reports whether it
// took over.
func (n *Node) takeOver(ctx context.Context) (bool, error) {
	c, ok := n.setup.(*clientSetup)
	if !ok || c.owned() != nil {
		return false, nil
	}
	lock, err := lockDir(n.cfg.DataDir)
	if errors.Is(err, errOwned) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	n.log.Warn("the owner of the data directory is gone; taking it over", "dir", n.cfg.DataDir, "nats", n.url)
	port, err := urlPort(n.url)
	if err != nil {
		lock.release()
		return false, err
	}
	o, err := n.openOwner(ctx, lock, port, n.reconnect)
	if err != nil {
		return false, err
	}
	if err := c.handOver(o); err != nil {
		o.close()
		return false, err
	}
	n.log.Warn("took over the data directory: serving the store and the oracle", "dir", n.cfg.DataDir, "nats", n.url)
	return true, nil
}

// reconnect has the node's connection, which is retrying the old owner's
// server with backoff, try the new embedded server at once, and waits
// until it is connected, at most cfg.ConnectTimeout.
func (n *Node) reconnect(ctx context.Context, _ string) error {
	if err := n.nc.ForceReconnect(); err != nil {
		return fmt.Errorf("runner: reconnecting to the new embedded server: %w", err)
	}
	deadline := time.Now().Add(n.cfg.ConnectTimeout)
	for !n.nc.IsConnected() {
		if time.Now().After(deadline) {
			return fmt.Errorf("runner: not reconnected to the new embedded server on %s within %v", n.url, n.cfg.ConnectTimeout)
		}
		if err := retry.Sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// handOver switches the store and the oracle the client hands out to o's,
// which from now on is the owner this process is. It fails if the node
// is closing: the caller then closes o.
func (c *clientSetup) handOver(o *ownerSetup) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("runner: the node closed during the takeover")
	}
	c.handover.set(o.db, o.timed)
	c.owner.Store(o)
	return nil
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
