package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// handlerFunc serves one decoded request: d holds the body after the
// header, and the response goes into e (starting with the wire version).
// d.finish() must be checked by the handler before acting on the request.
type handlerFunc func(ctx context.Context, d *decoder, e *encoder) error

// server is what StoreService and OracleService have in common: a micro
// service whose handlers run with bounded concurrency and answer through
// the connection directly, and a Stop that waits for them.
type server struct {
	nc         *nats.Conn
	cfg        *config
	log        *slog.Logger
	svc        micro.Service
	maxPayload int
	// jobs feeds the worker goroutines, at most maxWorkers of them; with
	// maxWorkers 1 handlers run inline on the subscription's goroutine
	// (concurrency 1 per endpoint). Workers are kept rather than started
	// per request, so their stacks stay grown to what a store operation
	// needs.
	jobs       chan job
	maxWorkers int
	workers    atomic.Int32
	// ctx is the parent of every handler's context.
	ctx    context.Context
	cancel context.CancelFunc

	// errs counts error responses per endpoint subject for micro's STATS
	// (micro counts only errors sent through its Request, which we do
	// not use).
	errs sync.Map // subject -> *atomic.Uint64

	mu       sync.Mutex
	stopped  bool
	inflight int
	idle     sync.Cond // signalled when inflight drops to 0 after stopped
}

// newServer registers a micro service named name on nc. Endpoints are
// added with endpoint.
func newServer(nc *nats.Conn, cfg *config, name, desc string, concurrency int) (*server, error) {
	if nc == nil {
		return nil, errors.New("remote: nil NATS connection")
	}
	s := &server{nc: nc, cfg: cfg, log: cfg.log.With("service", name), maxPayload: int(nc.MaxPayload())}
	if s.maxPayload <= 0 {
		s.maxPayload = 1 << 20 // not connected yet: the NATS default
	}
	s.maxWorkers = concurrency
	s.jobs = make(chan job)
	s.idle.L = &s.mu
	s.ctx, s.cancel = context.WithCancel(context.Background())
	svc, err := micro.AddService(nc, micro.Config{
		Name:        name,
		Version:     serviceVersion,
		Description: desc,
		QueueGroup:  cfg.queue,
		Metadata:    map[string]string{"prefix": cfg.prefix, "wire": fmt.Sprint(wireVersion)},
		ErrorHandler: func(_ micro.Service, e *micro.NATSError) {
			s.log.Error("remote: subscription error", "subject", e.Subject, "err", e.Description)
		},
		StatsHandler: func(e *micro.Endpoint) any {
			var n uint64
			if c, ok := s.errs.Load(e.Subject); ok {
				n = c.(*atomic.Uint64).Load()
			}
			return endpointStats{Errors: n}
		},
	})
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("remote: starting %s service: %w", name, err)
	}
	s.svc = svc
	return s, nil
}

// serviceVersion is the micro service version; its major number follows
// the wire version.
const serviceVersion = "1.0.0"

// endpoint adds endpoint name of group grp, served by h.
func (s *server) endpoint(grp micro.Group, name string, h handlerFunc) error {
	err := grp.AddEndpoint(name, micro.HandlerFunc(func(req micro.Request) {
		if !s.begin() {
			s.fail(req, name, fmt.Errorf("%w: service stopping", ErrUnavailable))
			return
		}
		if s.maxWorkers <= 1 {
			defer s.end()
			s.serve(name, h, req)
			return
		}
		j := job{name: name, h: h, req: req}
		select {
		case s.jobs <- j: // an idle worker took it
			return
		default:
		}
		if n := s.workers.Add(1); n <= int32(s.maxWorkers) {
			go s.work(j)
			return
		}
		s.workers.Add(-1)
		// Blocking here holds up the subscription, so requests wait in
		// its pending queue: bounded goroutines, back-pressure to NATS.
		s.jobs <- j
	}))
	if err != nil {
		return fmt.Errorf("remote: adding endpoint %s: %w", name, err)
	}
	return nil
}

// endpointStats is the data micro's STATS shows for an endpoint.
type endpointStats struct {
	Errors uint64 `json:"errors"`
}

// job is one request for a worker.
type job struct {
	name string
	h    handlerFunc
	req  micro.Request
}

// work serves j and then further jobs until stop closes the channel.
func (s *server) work(j job) {
	for {
		s.serve(j.name, j.h, j.req)
		s.end()
		var ok bool
		if j, ok = <-s.jobs; !ok {
			return
		}
	}
}

// ready waits until the NATS server has the service's subscriptions, so
// that requests from other connections find it as soon as Serve* returns.
func (s *server) ready() {
	if err := s.nc.FlushTimeout(5 * time.Second); err != nil {
		s.log.Warn("remote: service subscriptions not confirmed by the NATS server", "err", err)
	}
}

// begin registers a request; it fails once Stop has begun.
func (s *server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.inflight++
	return true
}

// end unregisters a request registered by begin.
func (s *server) end() {
	s.mu.Lock()
	s.inflight--
	if s.inflight == 0 && s.stopped {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

// serve decodes the header, runs h under a deadline and sends its answer.
// Only our own code touches req (micro's request bookkeeping is not safe
// for use from another goroutine), so replies go through the connection.
func (s *server) serve(name string, h handlerFunc, req micro.Request) {
	reply := req.Reply()
	if reply == "" {
		return // a publish, not a request: nobody to answer
	}
	d := decoder{b: req.Data()}
	timeout := d.header()
	if d.err != nil {
		s.fail(req, name, d.err)
		return
	}
	budget := s.cfg.handlerTimeout
	if timeout > 0 && timeout < budget {
		budget = timeout
	}
	ctx, cancel := context.WithTimeout(s.ctx, budget)
	defer cancel()
	e := getEncoder()
	defer putEncoder(e)
	err := h(ctx, &d, e)
	if err == nil && len(e.b) > s.maxPayload {
		err = fmt.Errorf("%w: response of %d bytes exceeds the max payload of %d", ErrTooLarge, len(e.b), s.maxPayload)
	}
	if err != nil {
		s.fail(req, name, err)
		return
	}
	if err := s.nc.Publish(reply, e.b); err != nil {
		s.log.Warn("remote: sending response", "endpoint", name, "err", err)
	}
}

// maxDescription caps the error text sent in a header.
const maxDescription = 1024

// fail answers req with a micro error whose code the client maps back.
func (s *server) fail(req micro.Request, name string, err error) {
	reply, subject := req.Reply(), req.Subject()
	if reply == "" {
		return
	}
	code, data := errorCode(err)
	c, ok := s.errs.Load(subject)
	if !ok {
		c, _ = s.errs.LoadOrStore(subject, new(atomic.Uint64))
	}
	c.(*atomic.Uint64).Add(1)
	if code == codeInternal {
		s.log.Warn("remote: request failed", "endpoint", name, "err", err)
	} else {
		s.log.Debug("remote: request failed", "endpoint", name, "code", code, "err", err)
	}
	desc := strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, err.Error())
	if len(desc) > maxDescription {
		desc = desc[:maxDescription]
	}
	msg := &nats.Msg{Subject: reply, Data: data, Header: nats.Header{
		micro.ErrorHeader:     []string{desc},
		micro.ErrorCodeHeader: []string{code},
	}}
	if err := s.nc.PublishMsg(msg); err != nil {
		s.log.Warn("remote: sending error response", "endpoint", name, "err", err)
	}
}

// stop stops the micro service and waits for running handlers. Requests
// still queued in the subscriptions are answered with ErrUnavailable.
func (s *server) stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	s.mu.Unlock()
	err := s.svc.Stop()
	start := time.Now()
	s.mu.Lock()
	for s.inflight > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
	// No request is in flight and none can start: no job will be sent.
	close(s.jobs)
	s.cancel()
	s.log.Debug("remote: service stopped", "waited", time.Since(start))
	if err != nil {
		return fmt.Errorf("remote: stopping service: %w", err)
	}
	return nil
}
