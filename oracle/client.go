package oracle

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxBatch is the default cap on how many timestamps one coalesced
// Reserve call asks for.
const DefaultMaxBatch = 4096

// lanes is how many done channels a batch spreads its waiters over. All
// waiters of a batch block on a receive while new ones keep arriving; on
// one channel they would all contend for its lock, which costs more than
// the wake-up itself when hundreds of callers share a batch.
const lanes = 8

// Before sealing a batch the loop yields to runnable goroutines (callers
// on their way to join it) until a yield comes back within quietYield,
// which means nothing else was runnable, or maxYields times.
const (
	quietYield = 3 * time.Microsecond
	maxYields  = 8
)

// ClientStats are cumulative counters for metrics.
type ClientStats struct {
	Batches    uint64 // Reserve calls made to the underlying Reserver
	Timestamps uint64 // timestamps obtained by successful Reserve calls
	Errors     uint64 // Reserve calls that failed
	Pending    int    // timestamps requested by waiters not yet in a call
}

// Client coalesces concurrent timestamp requests into single Reserve calls.
//
// Against a Reserver (an in-process Server or a stub for a remote oracle),
// a round trip is then paid per batch rather than per transaction.
//
// At most one Reserve call is in flight per Client. Requests arriving while
// a call is in flight queue up and are all served by the next call, which
// asks for exactly the timestamps they still want. A request is never
// served from a call that had already started when it arrived, so every
// timestamp a Client returns is greater than every timestamp returned (by
// any caller) before the request began: a transaction that starts after
// another one committed sees it.
type Client struct {
	r        Reserver
	maxBatch int
	ctx      context.Context // for Reserve calls; cancelled by Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup // the running loop goroutine

	mu        sync.Mutex
	queue     []*batch // not yet sent; only the last one accepts requests
	pending   int      // sum of want over queue
	running   bool     // a loop goroutine owns the in-flight call
	closed    bool
	lastSlots int // slots of the last sealed batch: the next one's capacity

	batches, timestamps, errs atomic.Uint64
}

// batch is one future Reserve call and the requests it will serve.
type batch struct {
	slots  []slot // guarded by Client.mu until sealed, read-only after
	want   int    // timestamps wanted by live slots
	sealed bool   // taken by the loop; slots no longer change
	// done[i%lanes] is what the request in slot i waits on; all are closed
	// when the call returns. Created on demand under Client.mu until the
	// batch is sealed, read-only after.
	done  [lanes]chan struct{}
	first uint64 // valid after done is closed, if err == nil
	err   error
}

type slot struct {
	off       uint64 // offset from batch.first, set when sealed
	n         int32  // at most MaxReserve
	cancelled bool
}

// NewClient returns a Client drawing timestamps from r. The Client does not
// own r: Close does not close it. opts may be nil (all defaults); it is
// copied. An unusable option fails with an *OptionError naming the field.
func NewClient(r Reserver, opts *ClientOptions) (*Client, error) {
	if r == nil {
		return nil, errors.New("oracle: NewClient: nil Reserver")
	}
	var cfg ClientOptions
	if opts != nil {
		cfg = *opts
	}
	if err := cfg.EnsureDefaults().Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Client{r: r, maxBatch: cfg.MaxBatch, ctx: ctx, cancel: cancel}, nil
}

// Timestamp returns one fresh timestamp, greater than every timestamp any
// caller of this Client received before Timestamp was called.
func (c *Client) Timestamp(ctx context.Context) (uint64, error) {
	return c.Reserve(ctx, 1)
}

// Reserve returns the first of n consecutive timestamps, coalesced with
// concurrent requests like Timestamp. A request larger than the max batch
// gets a Reserve call of its own.
//
// If ctx ends first, Reserve returns its error at once; other requests are
// unaffected, and the timestamps that request would have received are
// simply never used.
func (c *Client) Reserve(ctx context.Context, n int) (uint64, error) {
	if n <= 0 || n > MaxReserve {
		return 0, fmt.Errorf("%w: %d (must be 1..%d)", ErrInvalidCount, n, MaxReserve)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	b, i, err := c.enqueue(n)
	if err != nil {
		return 0, err
	}
	if done := ctx.Done(); done == nil {
		<-b.done[i%lanes] // uncancellable: a plain receive is cheaper than select
	} else {
		select {
		case <-b.done[i%lanes]:
		case <-done:
			c.mu.Lock()
			if !b.sealed { // withdraw, so the call does not ask for it
				b.slots[i].cancelled = true
				b.want -= n
				c.pending -= n
			}
			c.mu.Unlock()
			return 0, ctx.Err()
		}
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.first + b.slots[i].off, nil
}

// enqueue adds a request for n timestamps to the open batch and makes sure
// a loop goroutine is running to send it.
func (c *Client) enqueue(n int) (*batch, int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, 0, ErrClosed
	}
	var b *batch
	if k := len(c.queue); k > 0 && (c.queue[k-1].want+n <= c.maxBatch || c.queue[k-1].want == 0) {
		b = c.queue[k-1]
	} else {
		// Size the slots like the last batch's, with some room to grow:
		// usually one allocation per batch rather than a series of growths.
		b = &batch{slots: make([]slot, 0, c.lastSlots+c.lastSlots/4+4)}
		c.queue = append(c.queue, b)
	}
	i := len(b.slots)
	if b.done[i%lanes] == nil {
		b.done[i%lanes] = make(chan struct{})
	}
	b.slots = append(b.slots, slot{n: int32(n)})
	b.want += n
	c.pending += n
	if !c.running {
		c.running = true
		c.wg.Add(1)
		go c.loop()
	}
	return b, i, nil
}

// loop sends queued batches one at a time until the queue is empty. Being
// the only sender is what keeps one call in flight; sealing a batch right
// before its call is what keeps requests out of calls that began before
// them.
func (c *Client) loop() {
	defer c.wg.Done()
	for {
		// Let runnable callers (typically those the last call just
		// served, coming back for more) join the batch before it is
		// sealed. With nothing else runnable the first yield returns at
		// once, so this costs no latency when idle; under load it makes
		// few large calls instead of many small ones, and a call costs
		// far more than a timestamp (a round trip, for a remote oracle).
		for range maxYields {
			t := time.Now()
			runtime.Gosched()
			if time.Since(t) < quietYield {
				break
			}
		}
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		b := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		b.sealed = true
		var off uint64
		for i := range b.slots {
			if !b.slots[i].cancelled {
				b.slots[i].off = off
				off += uint64(b.slots[i].n)
			}
		}
		c.pending -= b.want
		c.lastSlots = min(len(b.slots), c.maxBatch)
		closed := c.closed
		c.mu.Unlock()

		switch {
		case b.want == 0: // every request gave up
		case closed:
			b.err = ErrClosed
		default:
			b.first, b.err = c.r.Reserve(c.ctx, b.want)
			c.batches.Add(1)
			if b.err != nil {
				c.errs.Add(1)
			} else {
				c.timestamps.Add(uint64(b.want))
			}
		}
		for _, ch := range b.done {
			if ch != nil {
				close(ch)
			}
		}
	}
}

// Stats returns a snapshot of the Client's counters.
func (c *Client) Stats() ClientStats {
	c.mu.Lock()
	pending := c.pending
	c.mu.Unlock()
	return ClientStats{
		Batches:    c.batches.Load(),
		Timestamps: c.timestamps.Load(),
		Errors:     c.errs.Load(),
		Pending:    pending,
	}
}

// Close fails queued and later requests with ErrClosed, cancels the context
// of the in-flight Reserve call and waits for it to return. It is
// idempotent and does not close the underlying Reserver.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	return nil
}
