package remote

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Defaults of the options.
const (
	// DefaultPrefix is the first subject token of every endpoint.
	DefaultPrefix = "trickle"
	// DefaultQueueGroup is the queue group services subscribe in, so that
	// several instances of a stateless service could share the load.
	DefaultQueueGroup = "trickle"
	// DefaultRequestTimeout bounds a client request whose context has no
	// deadline, so a lost request or reply cannot hang a caller forever.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultHandlerTimeout bounds the work of one request on the server,
	// whatever timeout the client asked for.
	DefaultHandlerTimeout = time.Minute
	// DefaultScanPageCells is how many cells a Scan asks for per page.
	DefaultScanPageCells = 1024
	// MaxScanPageCells caps the cells of one page on the server, whatever
	// the client asks for.
	MaxScanPageCells = 16384
	// DefaultMaxBufferedBytes caps the bytes a service holds for messages
	// in parts (uploads not yet complete, answers not yet fetched), and
	// the size of an answer in parts a client accepts: enough for many
	// concurrent multi-megabyte row transactions, bounded so that clients
	// which vanish mid-transfer cannot exhaust the service's memory.
	DefaultMaxBufferedBytes = 256 << 20
)

// OptionError reports an invalid option, so that configuration code can
// say which knob is wrong.
type OptionError struct {
	Option string // option name, e.g. "WithSubjectPrefix"
	Value  any    // the rejected value
	Reason string // why it was rejected
}

// Error implements error.
func (e *OptionError) Error() string {
	return fmt.Sprintf("remote: invalid option %s(%v): %s", e.Option, e.Value, e.Reason)
}

type config struct {
	prefix         string
	queue          string
	log            *slog.Logger
	timeout        time.Duration
	handlerTimeout time.Duration
	concurrency    int
	pageCells      int
	// storeID and storeWhere are what a store service announces; see
	// WithStoreID.
	storeID, storeWhere string
	maxBuffered         int64
	// now is the clock of transfer expiry; tests replace it.
	now func() time.Time
	// onExpire, if set, is called (with the transfer table locked) for
	// every transfer dropped at its deadline; tests use it to learn that
	// the expiry timer ran.
	onExpire func(id uint64, upload bool)
	// onStopWait, if set, is called (with the server's mutex held) each
	// time Stop blocks waiting for running handlers, with how many run;
	// tests use it to know that Stop is waiting rather than guess.
	onStopWait func(inflight int)
}

// Option configures a service (ServeStore, ServeOracle) or a client
// (NewStore, NewOracle). Options that do not apply to one side are
// ignored by it, so one option list can configure both ends of a
// deployment. Options are validated when applied.
type Option func(*config) error

func newConfig(opts []Option) (*config, error) {
	c := &config{
		prefix:         DefaultPrefix,
		queue:          DefaultQueueGroup,
		log:            slog.Default(),
		timeout:        DefaultRequestTimeout,
		handlerTimeout: DefaultHandlerTimeout,
		pageCells:      DefaultScanPageCells,
		maxBuffered:    DefaultMaxBufferedBytes,
		now:            time.Now,
	}
	for _, o := range opts {
		if o == nil {
			return nil, &OptionError{Option: "Option", Value: "nil", Reason: "nil option"}
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// subject returns the subject of endpoint name of service svc.
func (c *config) subject(svc, name string) string { return c.prefix + "." + svc + "." + name }

// validToken reports whether s is a usable NATS subject token.
func validToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t\r\n.*>")
}

// WithSubjectPrefix sets the namespace of the subjects (default
// DefaultPrefix), so that several deployments can share a NATS system.
// It is one or more dot-separated tokens without wildcards or spaces.
func WithSubjectPrefix(prefix string) Option {
	return func(c *config) error {
		for _, tok := range strings.Split(prefix, ".") {
			if !validToken(tok) {
				return &OptionError{Option: "WithSubjectPrefix", Value: prefix,
					Reason: "must be dot-separated non-empty tokens without spaces or wildcards"}
			}
		}
		c.prefix = prefix
		return nil
	}
}

// WithQueueGroup sets the queue group of a service's endpoints (default
// DefaultQueueGroup). Each request goes to one member of the group.
func WithQueueGroup(queue string) Option {
	return func(c *config) error {
		if !validToken(queue) {
			return &OptionError{Option: "WithQueueGroup", Value: queue, Reason: "must be a non-empty token without spaces or wildcards"}
		}
		c.queue = queue
		return nil
	}
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			return &OptionError{Option: "WithLogger", Value: "nil", Reason: "logger must not be nil"}
		}
		c.log = l
		return nil
	}
}

// WithRequestTimeout sets how long a client waits for an answer when the
// caller's context has no earlier deadline (default DefaultRequestTimeout).
func WithRequestTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond || d > time.Hour {
			return &OptionError{Option: "WithRequestTimeout", Value: d, Reason: "must be between 1ms and 1h"}
		}
		c.timeout = d
		return nil
	}
}

// WithHandlerTimeout caps how long a service works on one request (default
// DefaultHandlerTimeout); the client's own timeout applies if shorter.
func WithHandlerTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < time.Millisecond || d > time.Hour {
			return &OptionError{Option: "WithHandlerTimeout", Value: d, Reason: "must be between 1ms and 1h"}
		}
		c.handlerTimeout = d
		return nil
	}
}

// WithMaxConcurrency caps how many requests a service handles at once
// (default: 64 for the store, whose Apply may wait for an fsync, and 1 for
// the oracle, whose Reserve is a compare-and-swap). Requests beyond the cap
// wait in the NATS subscription's pending queue.
func WithMaxConcurrency(n int) Option {
	return func(c *config) error {
		if n < 1 || n > 4096 {
			return &OptionError{Option: "WithMaxConcurrency", Value: n, Reason: "must be 1..4096"}
		}
		c.concurrency = n
		return nil
	}
}

// WithScanPageCells sets how many cells a client's Scan asks for per page
// (default DefaultScanPageCells): larger pages mean fewer round trips but
// more cells fetched that a consumer which stops early never sees.
func WithScanPageCells(n int) Option {
	return func(c *config) error {
		if n < 1 || n > MaxScanPageCells {
			return &OptionError{Option: "WithScanPageCells", Value: n, Reason: fmt.Sprintf("must be 1..%d", MaxScanPageCells)}
		}
		c.pageCells = n
		return nil
	}
}

// WithMaxBufferedBytes caps the memory of messages too large for one NATS
// message, which travel in parts (default DefaultMaxBufferedBytes). On a
// service it bounds the bytes held at once for uploads still arriving and
// answers not yet fetched: a request or answer larger than the cap fails
// with ErrTooLarge, and one that does not fit next to those in progress
// with ErrBusy. On a client it is the largest answer accepted in parts.
func WithMaxBufferedBytes(n int64) Option {
	return func(c *config) error {
		if n < 1<<16 || n > 1<<40 {
			return &OptionError{Option: "WithMaxBufferedBytes", Value: n, Reason: "must be 64 KiB..1 TiB"}
		}
		c.maxBuffered = n
		return nil
	}
}
