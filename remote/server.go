package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
	nc  *nats.Conn
	cfg *ServiceOptions
	log *slog.Logger
	svc micro.Service
	// parts holds the messages in parts in progress, and partSub
	// receives their further parts on partSubject, a subject of this
	// instance alone (an upload's parts must all reach the instance that
	// holds it); nil for a service whose messages always fit in one.
	parts       *transfers
	partSub     *nats.Subscription
	partSubject string
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
// added with endpoint. With parts, requests and answers too large for one
// NATS message travel in parts on <prefix>.<token>.part.<instance id>.
func newServer(nc *nats.Conn, cfg *ServiceOptions, name, token, desc string, concurrency int, parts bool) (*server, error) {
	if nc == nil {
		return nil, errors.New("remote: nil NATS connection")
	}
	s := &server{nc: nc, cfg: cfg, log: cfg.Logger.With("service", name)}
	s.maxWorkers = concurrency
	s.jobs = make(chan job)
	s.idle.L = &s.mu
	s.ctx, s.cancel = context.WithCancel(context.Background())
	svc, err := micro.AddService(nc, micro.Config{
		Name:        name,
		Version:     serviceVersion,
		Description: desc,
		QueueGroup:  cfg.QueueGroup,
		Metadata:    map[string]string{"prefix": cfg.SubjectPrefix, "wire": fmt.Sprint(wireVersion), "parts": fmt.Sprint(parts)},
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
	if parts {
		s.parts = newTransfers(cfg, s.log)
		s.partSubject = subject(cfg.SubjectPrefix, token, "part") + "." + svc.Info().ID
		if s.partSub, err = nc.Subscribe(s.partSubject, s.onPart); err != nil {
			svc.Stop()
			s.cancel()
			return nil, fmt.Errorf("remote: starting %s service: subscribing to %s: %w", name, s.partSubject, err)
		}
	}
	return s, nil
}

// serviceVersion is the micro service version; its major number follows
// the wire version, its minor number the additions (1.1: messages in
// parts; 1.2: the readrows endpoint; 1.3: the applyall endpoint; 1.4: the
// readnow and applynow endpoints; 1.5: the applyatomic endpoint; 1.6: the
// ingest endpoint; 1.7: row transactions carry a Snapshot, refused below
// the store's safe point).
const serviceVersion = "1.7.0"

// payloadLimit is the largest message the connection may publish now
// (the NATS server's max payload, which a reconnect may change).
func (s *server) payloadLimit() int {
	if n := s.nc.MaxPayload(); n > 0 {
		return int(n)
	}
	return 1 << 20 // no server info yet: the NATS default
}

// endpoint adds endpoint name of group grp, served by h.
func (s *server) endpoint(grp micro.Group, name string, h handlerFunc) error {
	err := grp.AddEndpoint(name, micro.HandlerFunc(func(req micro.Request) {
		// Only our own code touches req (micro's request bookkeeping is
		// not safe for use from another goroutine), and only here.
		j := job{name: name, h: h, data: req.Data(), reply: req.Reply(), subject: req.Subject(), deadline: deadline(req.Headers().Get)}
		if err := s.misdirected(req.Headers()); err != nil {
			s.fail(j.reply, j.subject, name, err)
			return
		}
		if !s.begin() {
			s.fail(j.reply, j.subject, name, fmt.Errorf("%w: service stopping", ErrUnavailable))
			return
		}
		if len(j.data) > 0 && j.data[0] == partVersion {
			s.open(j)
			return
		}
		s.dispatch(j)
	}))
	if err != nil {
		return fmt.Errorf("remote: adding endpoint %s: %w", name, err)
	}
	return nil
}

// dispatch runs j on a worker, and ends the request registered by begin
// when done.
func (s *server) dispatch(j job) {
	if s.maxWorkers <= 1 {
		defer s.end()
		s.serve(j)
		return
	}
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
	// Blocking here holds up the subscription, so requests wait in its
	// pending queue: bounded goroutines, back-pressure to NATS.
	s.jobs <- j
}

// endpointStats is the data micro's STATS shows for an endpoint.
type endpointStats struct {
	Errors uint64 `json:"errors"`
}

// job is one request for a worker: the request message (whole, or
// reassembled from parts), where to answer, and the endpoint's name,
// subject and handler.
type job struct {
	name    string
	h       handlerFunc
	data    []byte
	reply   string
	subject string
	// opened is when the first part of a request in parts arrived: the
	// handler gets what is left of the client's timeout.
	opened time.Time
	// deadline is when the client gives up on the request (zero: a client
	// that does not say), after which it must not run: see serve.
	deadline time.Time
}

// deadlineHeader carries a request's absolute deadline, in Unix
// nanoseconds: a NATS client buffers what it publishes while it
// reconnects and sends it once connected again, possibly to a new owner
// after a takeover, long after the caller gave up.
const deadlineHeader = "Trickle-Deadline"

// deadline reads a message's deadline header through get (zero if it has
// none or a malformed one).
func deadline(get func(string) string) time.Time {
	ns, err := strconv.ParseInt(get(deadlineHeader), 10, 64)
	if err != nil || ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// work serves j and then further jobs until stop closes the channel.
func (s *server) work(j job) {
	for {
		s.serve(j)
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

// serve decodes the header, runs the handler under a deadline and sends
// its answer.
func (s *server) serve(j job) {
	if j.reply == "" {
		return // a publish, not a request: nobody to answer
	}
	d := newDecoder(j.data)
	asked := d.header()
	if d.Err() != nil {
		s.fail(j.reply, j.subject, j.name, d.err())
		return
	}
	budget := s.cfg.HandlerTimeout
	if timeout := asked; timeout > 0 {
		if !j.opened.IsZero() {
			timeout -= time.Since(j.opened) // spent on the parts
		}
		budget = max(min(budget, timeout), 0)
	}
	if !j.deadline.IsZero() {
		// Its caller gave up: an Apply run now would be one it reported
		// as unknown, and stopped protecting from garbage collection.
		left := time.Until(j.deadline)
		if left <= 0 {
			s.fail(j.reply, j.subject, j.name, fmt.Errorf("%w: the request's deadline passed %v before it was served", context.DeadlineExceeded, -left))
			return
		}
		budget = min(budget, left)
	}
	ctx, cancel := context.WithTimeout(s.ctx, budget)
	defer cancel()
	e := getEncoder()
	defer putEncoder(e)
	if err := j.h(ctx, &d, e); err != nil {
		s.fail(j.reply, j.subject, j.name, err)
		return
	}
	s.respond(ctx, j, e, asked)
}

// maxDescription caps the error text sent in a header.
const maxDescription = 1024

// fail answers a request with a micro error whose code the client maps
// back, and counts it against subject (the endpoint's).
func (s *server) fail(reply, subject, name string, err error) {
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
	if s.partSub != nil {
		if uerr := s.partSub.Unsubscribe(); uerr != nil && !errors.Is(uerr, nats.ErrConnectionClosed) && err == nil {
			err = uerr
		}
	}
	// Once the NATS server has the unsubscriptions, requests to the
	// service find no responders instead of vanishing.
	if s.nc.IsConnected() {
		if ferr := s.nc.FlushTimeout(5 * time.Second); ferr != nil {
			s.log.Warn("remote: service unsubscriptions not confirmed by the NATS server", "err", ferr)
		}
	}
	start := time.Now()
	s.mu.Lock()
	for s.inflight > 0 {
		if s.cfg.onStopWait != nil {
			s.cfg.onStopWait(s.inflight)
		}
		s.idle.Wait()
	}
	s.mu.Unlock()
	// No request is in flight and none can start: no job will be sent.
	close(s.jobs)
	s.cancel()
	if s.parts != nil {
		s.parts.close()
	}
	s.log.Debug("remote: service stopped", "waited", time.Since(start))
	if err != nil {
		return fmt.Errorf("remote: stopping service: %w", err)
	}
	return nil
}
