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
	cfg    *ClientOptions
	svc    service
	closed atomic.Bool
	// expect is the id of the store every request is for (see Expect);
	// nil until set.
	expect atomic.Pointer[string]
	// errClosed is what calls return after Close: store.ErrClosed or
	// oracle.ErrClosed, as the local implementation would.
	errClosed error
}

func newClient(nc *nats.Conn, opts *ClientOptions, svc service, errClosed error) (*client, error) {
	if nc == nil {
		return nil, errors.New("remote: nil NATS connection")
	}
	cfg, err := clientOptions(opts)
	if err != nil {
		return nil, err
	}
	return &client{nc: nc, cfg: cfg, svc: svc, errClosed: errClosed}, nil
}

// request sends the request that body encodes to subj and returns the
// body of the answer, or the error it carries. The request is bounded by
// ctx and by the client's request timeout, and tells the server the time
// left so it can give up when nobody waits for the answer any more. A
// request or answer too large for one NATS message travels in parts (see
// upload and download); one that fits takes one round trip, as always.
func (c *client) request(ctx context.Context, op, subj string, body func(*encoder)) ([]byte, error) {
	if c.closed.Load() {
		return nil, c.errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timeout := c.cfg.RequestTimeout
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
	if !hasDeadline || timeout == c.cfg.RequestTimeout {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	call := &call{c: c, ctx: ctx, rctx: rctx, timeout: timeout, op: op}
	e := getEncoder()
	e.header(timeout)
	body(e)
	limit := c.payloadLimit()
	var msg *nats.Msg
	var err error
	if len(e.b) <= limit {
		msg, err = call.roundTrip(op, subj, e.b)
	} else {
		msg, err = call.upload(subj, e.b, limit)
	}
	putEncoder(e) // the request is in NATS's buffer now
	if err != nil {
		return nil, err
	}
	if len(msg.Data) > 0 && msg.Data[0] == partVersion {
		return call.download(msg.Data, limit)
	}
	return msg.Data, nil
}

// payloadLimit is the largest message the connection may publish now.
func (c *client) payloadLimit() int {
	if n := c.nc.MaxPayload(); n > 0 {
		return int(n)
	}
	return 1 << 20 // no server info yet: the NATS default
}

// call is one client operation: its contexts (the caller's, and the one
// bounded by the request timeout) and what errors name.
type call struct {
	c         *client
	ctx, rctx context.Context
	timeout   time.Duration
	op        string
}

// roundTrip sends one message to subj and returns the answer, or the
// error it carries; what names the message in errors (the operation, or a
// part of it).
func (r *call) roundTrip(what, subj string, data []byte) (*nats.Msg, error) {
	m := &nats.Msg{Subject: subj, Data: data}
	if id := r.c.expect.Load(); id != nil {
		m.Header = nats.Header{storeHeader: []string{*id}}
	}
	msg, err := r.c.nc.RequestMsgWithContext(r.rctx, m)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && r.ctx.Err() == nil {
			return nil, fmt.Errorf("remote: %s: %w: no answer on %s within %v (NATS server %s): %w",
				what, ErrUnavailable, subj, r.timeout, r.c.server(), err)
		}
		return nil, transportError(what, err)
	}
	if err := responseError(r.c.svc, what, msg); err != nil {
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
