package tikvtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"
	pd "github.com/tikv/pd/client"
	"github.com/tikv/pd/client/clients/tso"
	"github.com/tikv/pd/client/pkg/caller"

	"github.com/trickle-dev/trickle/internal/retry"
)

// Latency is what a simulated cluster adds to the mock's answers: the
// mock answers in microseconds, in process, where a real cluster's
// requests cross a network and its writes a Raft log, so benchmarks on
// the mock alone cannot show what latency costs or whether concurrency
// hides it. The zero value adds nothing.
type Latency struct {
	// Read is added to every request that only reads: Get, BatchGet,
	// Scan, ScanLock and CheckSecondaryLocks (and their raw forms).
	Read time.Duration
	// Write is added to every other TiKV request: those that go through
	// Raft on a real cluster (Prewrite, Commit, Cleanup, ResolveLock,
	// CheckTxnStatus, TxnHeartBeat, …).
	Write time.Duration
	// Timestamp is added to every timestamp PD hands out.
	Timestamp time.Duration
}

// ReadLatency, WriteLatency and TimestampLatency are a plausible
// three-node cluster in one data centre: half a millisecond for a read
// or a timestamp, two for a replicated write.
const (
	ReadLatency      = 500 * time.Microsecond
	WriteLatency     = 2 * time.Millisecond
	TimestampLatency = 500 * time.Microsecond
)

// DataCentre is the Latency of ReadLatency, WriteLatency and
// TimestampLatency.
var DataCentre = Latency{Read: ReadLatency, Write: WriteLatency, Timestamp: TimestampLatency}

func (l Latency) validate() error {
	if l.Read < 0 || l.Write < 0 || l.Timestamp < 0 {
		return fmt.Errorf("tikvtest: negative latency %+v", l)
	}
	return nil
}

// isRead reports whether a request only reads.
func isRead(t tikvrpc.CmdType) bool {
	switch t {
	case tikvrpc.CmdGet, tikvrpc.CmdBatchGet, tikvrpc.CmdBufferBatchGet, tikvrpc.CmdScan, tikvrpc.CmdScanLock,
		tikvrpc.CmdCheckSecondaryLocks, tikvrpc.CmdRawGet, tikvrpc.CmdRawBatchGet, tikvrpc.CmdRawScan:
		return true
	}
	return false
}

// wait sleeps d, or until ctx ends; no latency costs no timer.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return retry.Sleep(ctx, d)
}

// SetLatency changes the latency the cluster's clients see from their
// next request on: a benchmark loads its data at full speed, say, then
// measures under latency.
func (c *Cluster) SetLatency(l Latency) error {
	if err := l.validate(); err != nil {
		return err
	}
	c.lat.Store(&l)
	return nil
}

func (c *Cluster) latency() Latency {
	if l := c.lat.Load(); l != nil {
		return *l
	}
	return Latency{}
}

// requests counts a cluster's requests by type.
type requests struct {
	total atomic.Int64
	mu    sync.Mutex
	by    map[tikvrpc.CmdType]*atomic.Int64
	ts    atomic.Int64 // PD timestamps
}

func (r *requests) count(t tikvrpc.CmdType) {
	r.total.Add(1)
	r.mu.Lock()
	n := r.by[t]
	if n == nil {
		if r.by == nil {
			r.by = map[tikvrpc.CmdType]*atomic.Int64{}
		}
		n = new(atomic.Int64)
		r.by[t] = n
	}
	r.mu.Unlock()
	n.Add(1)
}

// RPCsByType returns how many RPCs of each type the clients of the
// cluster sent (PD's timestamps not included), for benchmarks that
// report where the requests go.
func (c *Cluster) RPCsByType() map[string]int64 {
	c.reqs.mu.Lock()
	defer c.reqs.mu.Unlock()
	out := make(map[string]int64, len(c.reqs.by))
	for t, n := range c.reqs.by {
		out[t.String()] = n.Load()
	}
	return out
}

// Timestamps returns how many timestamps the clients of the cluster drew
// from PD.
func (c *Cluster) Timestamps() int64 { return c.reqs.ts.Load() }

// Summary is RPCsByType as one line, largest first.
func (c *Cluster) Summary() string {
	by := c.RPCsByType()
	types := make([]string, 0, len(by))
	for t := range by {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return by[types[i]] > by[types[j]] })
	var b strings.Builder
	for i, t := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", t, by[t])
	}
	fmt.Fprintf(&b, "; PD timestamps %d", c.Timestamps())
	return b.String()
}

// counting counts the RPCs a client sends and delays them by the
// cluster's latency.
type counting struct {
	tikvclient.Client
	c *Cluster
}

// SendRequest counts req, delays it and sends it. A request whose context
// ended fails with context.Canceled, whatever ended it: client-go takes
// any other error (a deadline's included) for a store that did not
// answer, and sends it nothing more until it answers a health check,
// which TiKV does at once and the mock never does; a client whose caller
// gave up on a request once would then find every region unavailable.
func (c *counting) SendRequest(ctx context.Context, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	resp, err := c.send(ctx, addr, req, timeout)
	if err != nil && ctx.Err() != nil {
		return nil, context.Canceled
	}
	return resp, err
}

func (c *counting) send(ctx context.Context, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	c.c.reqs.count(req.Type)
	lat := c.c.latency()
	d := lat.Write
	if isRead(req.Type) {
		d = lat.Read
	}
	if err := wait(ctx, d); err != nil {
		return nil, err
	}
	var resp *tikvrpc.Response
	var err error
	c.c.cpu.measure(func() {
		resp, err = c.c.serve(ctx, c.Client, addr, req, timeout)
	})
	return resp, err
}

// timestamps counts the timestamps a PD client draws and delays them by
// the cluster's latency.
type timestamps struct {
	pd.Client
	c *Cluster
}

// WithCallerComponent keeps the wrapper around the client client-go
// derives (it names itself to PD that way).
func (t *timestamps) WithCallerComponent(c caller.Component) pd.Client {
	return &timestamps{Client: t.Client.WithCallerComponent(c), c: t.c}
}

func (t *timestamps) GetTS(ctx context.Context) (int64, int64, error) {
	t.c.reqs.ts.Add(1)
	if t.c.failTimestamp() {
		return 0, 0, errPDDown
	}
	if err := wait(ctx, t.c.latency().Timestamp); err != nil {
		return 0, 0, err
	}
	physical, logical, err := t.Client.GetTS(ctx)
	return physical + t.c.clockAhead.Load(), logical, err
}

func (t *timestamps) GetTSAsync(ctx context.Context) tso.TSFuture {
	t.c.reqs.ts.Add(1)
	return &delayedTS{TSFuture: t.Client.GetTSAsync(ctx), ctx: ctx, due: time.Now().Add(t.c.latency().Timestamp), ahead: &t.c.clockAhead, fail: t.c.failTimestamp()}
}

// FailTimestamps makes the next n timestamps the cluster hands out fail,
// as in an outage of PD; FailTimestamps(0) ends the outage. The client's
// own background refresh of its low-resolution timestamp draws from the
// same count.
func (c *Cluster) FailTimestamps(n int64) { c.failTS.Store(n) }

// failTimestamp reports whether the timestamp being drawn fails, counting
// it against FailTimestamps.
func (c *Cluster) failTimestamp() bool {
	for {
		n := c.failTS.Load()
		if n <= 0 {
			return false
		}
		if c.failTS.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// errPDDown is the error of a timestamp FailTimestamps fails.
var errPDDown = errors.New("tikvtest: PD is down (FailTimestamps)")

// UpdateGCSafePoint moves PD's safe point and has the mock drop the
// versions below it, as TiKV's collection does once it learns the safe
// point (the mock on its own keeps every version forever).
func (t *timestamps) UpdateGCSafePoint(ctx context.Context, sp uint64) (uint64, error) {
	got, err := t.Client.UpdateGCSafePoint(ctx, sp)
	if err == nil {
		t.c.collect(got)
	}
	return got, err
}

// delayedTS is a timestamp future answered a latency after it was asked
// for.
type delayedTS struct {
	tso.TSFuture
	ctx   context.Context
	due   time.Time
	ahead *atomic.Int64
	fail  bool // FailTimestamps failed it
}

func (f *delayedTS) Wait() (int64, int64, error) {
	if f.fail {
		return 0, 0, errPDDown
	}
	if err := wait(f.ctx, time.Until(f.due)); err != nil {
		return 0, 0, err
	}
	physical, logical, err := f.TSFuture.Wait()
	return physical + f.ahead.Load(), logical, err
}
