package remote

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// client is the request path StoreClient and OracleClient share: deadline
// propagation, the wire header and error mapping.
type client struct {
	nc     *nats.Conn
	cfg    *config
	svc    service
	closed atomic.Bool
	// errClosed is what calls return after Close: store.ErrClosed or
	// oracle.ErrClosed, as the local implementation would.
	errClosed error
}

func newClient(nc *nats.Conn, opts []Option, svc service, errClosed error) (*client, error) {
	if nc == nil {
		return nil, errors.New("remote: nil NATS connection")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &client{nc: nc, cfg: cfg, svc: svc, errClosed: errClosed}, nil
}

// request sends the request that body encodes to subj and returns the
// response, or the error it carries. The request is bounded by ctx and by
// the client's request timeout, and tells the server the time left so it
// can give up when nobody waits for the answer any more.
func (c *client) request(ctx context.Context, op, subj string, body func(*encoder)) (*nats.Msg, error) {
	if c.closed.Load() {
		return nil, c.errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := c.cfg.timeout
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		left := time.Until(deadline)
		if left <= 0 {
			return nil, context.DeadlineExceeded
		}
		if left < timeout {
			timeout = left
		}
	}
	rctx := ctx
	if !hasDeadline || timeout == c.cfg.timeout {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	e := getEncoder()
	e.header(timeout)
	body(e)
	msg, err := c.nc.RequestWithContext(rctx, subj, e.b)
	putEncoder(e) // the request is in NATS's buffer now
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("remote: %s: %w: no answer on %s within %v (NATS server %s): %w",
				op, ErrUnavailable, subj, timeout, c.server(), err)
		}
		return nil, transportError(op, err)
	}
	if err := responseError(c.svc, op, msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// server names the NATS server the connection uses, for messages.
func (c *client) server() string {
	if u := c.nc.ConnectedUrlRedacted(); u != "" {
		return u
	}
	if s := c.nc.Servers(); len(s) > 0 {
		return s[0] + " (not connected)"
	}
	return "(none)"
}

// close makes later calls fail with errClosed.
func (c *client) close() error {
	c.closed.Store(true)
	return nil
}
