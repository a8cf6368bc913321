package remote

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
// A message in parts gets time for its size on top of the request
// timeout (see ClientOptions.MinTransferRate), and each of its parts but
// the one the request's answer waits for must be answered within the
// request timeout: a big transfer may take long, but never stall.
func (c *client) request(ctx context.Context, op, subj string, body func(*encoder)) ([]byte, error) {
	if c.closed.Load() {
		return nil, c.errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	deadline, hasDeadline := ctx.Deadline()
	var left time.Duration
	if hasDeadline {
		if left = time.Until(deadline); left <= 0 {
			return nil, context.DeadlineExceeded
		}
	}
	timeout := callTime(c.cfg, 0, left)
	e := getEncoder()
	e.header(timeout)
	body(e)
	limit := c.payloadLimit()
	inParts := len(e.b) > limit
	if inParts {
		if t := callTime(c.cfg, len(e.b), left); t != timeout {
			timeout = t
			e.setHeader(timeout)
		}
	}
	call := &call{c: c, ctx: ctx, rctx: ctx, timeout: timeout, op: op}
	defer call.release()
	if !hasDeadline || timeout < left {
		call.rctx, call.cancel = context.WithTimeout(ctx, timeout)
	}
	var msg *nats.Msg
	var err error
	if !inParts {
		msg, err = call.roundTrip(op, subj, e.b, 0)
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

// callTime is how long a request may take: RequestTimeout, plus, for a
// message in parts of size bytes (0: one message), its size at
// MinTransferRate; never more than an hour, nor than the caller's time
// left if it has a deadline (left > 0).
func callTime(cfg *ClientOptions, size int, left time.Duration) time.Duration {
	t := cfg.RequestTimeout
	if size > 0 {
		t = maxTimeout
		if secs := float64(size) / float64(cfg.MinTransferRate); secs < maxTimeout.Seconds() {
			t = min(cfg.RequestTimeout+time.Duration(secs*float64(time.Second)), maxTimeout)
		}
	}
	if left > 0 {
		t = min(t, left)
	}
	return t
}

// payloadLimit is the largest message the connection may publish now.
func (c *client) payloadLimit() int {
	if n := c.nc.MaxPayload(); n > 0 {
		return int(n)
	}
	return 1 << 20 // no server info yet: the NATS default
}

// call is one client operation: its contexts (the caller's, and the one
// bounded by the request's time) and what errors name.
type call struct {
	c         *client
	ctx, rctx context.Context
	cancel    context.CancelFunc // rctx's, if it has its own
	timeout   time.Duration
	op        string
}

// release frees rctx's timer.
func (r *call) release() {
	if r.cancel != nil {
		r.cancel()
	}
}

// extend gives the call the time an answer of size bytes in parts needs
// from now (see callTime), if that is more than it has left.
func (r *call) extend(size int) {
	var left time.Duration
	if dl, ok := r.ctx.Deadline(); ok {
		if left = time.Until(dl); left <= 0 {
			return
		}
	}
	t := callTime(r.c.cfg, size, left)
	if dl, ok := r.rctx.Deadline(); ok && time.Until(dl) >= t {
		return
	}
	r.release()
	r.rctx, r.cancel = context.WithTimeout(r.ctx, t)
	r.timeout = t
}

// roundTrip sends one message to subj and returns the answer, or the
// error it carries; what names the message in errors (the operation, or a
// part of it). wait, if not 0, bounds this round trip (a part of a
// message: the request timeout) within the call's time.
func (r *call) roundTrip(what, subj string, data []byte, wait time.Duration) (*nats.Msg, error) {
	m := &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
	if id := r.c.expect.Load(); id != nil {
		m.Header.Set(storeHeader, *id)
	}
	// The call's absolute deadline: a request the connection buffered
	// while it was reconnecting reaches a service only after the caller
	// gave up (and reported the outcome unknown), and must not run then.
	if dl, ok := r.rctx.Deadline(); ok {
		m.Header.Set(deadlineHeader, strconv.FormatInt(dl.UnixNano(), 10))
	}
	ctx, within := r.rctx, r.timeout
	if wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(r.rctx, wait)
		defer cancel()
		within = min(wait, r.timeout)
	}
	msg, err := r.c.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && r.ctx.Err() == nil {
			return nil, fmt.Errorf("remote: %s: %w: no answer on %s within %v (NATS server %s): %w",
				what, ErrUnavailable, subj, within, r.c.server(), err)
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
