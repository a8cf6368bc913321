package main

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"
	"github.com/tikv/client-go/v2/util/async"
)

// errDead is what a dead client process's requests get: no answer.
var errDead error = deadErr{}

// deadErr is errDead's type. client-go sees a request its caller
// cancelled (pingcap/errors.Cause), which it does not retry: a process
// that is gone sends nothing more, rather than retrying for its backoff
// budget (seconds) against a link that never answers.
type deadErr struct{}

func (deadErr) Error() string { return "sicheck: the client process died" }

// Cause is what client-go's errors.Cause sees.
func (deadErr) Cause() error { return context.Canceled }

// faultyRPC is a tikv-native client process's link to the TiKV nodes (the
// RPC hijack of its TiKV client), where its faults are injected:
//
//   - a commit crash: one prewrite or commit request in crashOneIn kills
//     the process at that step, before the request is sent or after it
//     was (its answer lost), at even odds; from then on every request of
//     the process fails at once with errDead, and whatever it left behind
//     (locks, a primary committed whose secondaries are not) is for the
//     other processes' lock resolvers and the collections to settle;
//   - a pause: while the gate is closed, every request waits before it is
//     sent and every answer before it is delivered, as if the process
//     were stopped (PD's timestamps do not come through here, but a
//     timestamp drawn during a pause is one drawn just before it); a
//     read trips an armed gate (see gate.trip).
//
// Its prewrites take locks of a shorter TTL than client-go's (see
// shortenTTL).
//
// It also notes the reads answered below the safe point a collection set
// out to reach (see native), and counts the prewrites sent below it.
type faultyRPC struct {
	tikvclient.Client
	gate
	crashOneIn int
	passed     *atomic.Uint64
	fig        *figures
	crashed    *atomic.Bool // the incarnation's: set once it died
	dead       atomic.Bool

	mu sync.Mutex
	// below maps the snapshots of the reads answered below passed to the
	// safe point they were below; prewrote holds the start timestamps of
	// the prewrites sent below it.
	below    map[uint64]uint64
	prewrote map[uint64]bool
}

// SendRequest sends req unless the process is dead, through its faults.
func (f *faultyRPC) SendRequest(ctx context.Context, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	if isRead(req.Type) || req.Type == tikvrpc.CmdPrewrite {
		// A pause at a prewrite is one after the transaction's last
		// read and its check before committing.
		f.gate.trip()
	}
	if err := f.gate.wait(ctx); err != nil {
		return nil, err
	}
	if f.dead.Load() {
		return nil, errDead
	}
	after := false
	if f.crashOneIn > 0 && (req.Type == tikvrpc.CmdPrewrite || req.Type == tikvrpc.CmdCommit) && rand.IntN(f.crashOneIn) == 0 {
		if rand.IntN(2) == 0 {
			f.die(&f.fig.crashesBefore)
			return nil, errDead
		}
		after = true
	}
	if req.Type == tikvrpc.CmdPrewrite {
		shortenTTL(req)
		f.notePrewrite(req.Prewrite().GetStartVersion())
	}
	resp, err := f.Client.SendRequest(ctx, addr, req, timeout)
	if after {
		f.die(&f.fig.crashesAfter)
	}
	// A pause while the request was out holds its answer; a death loses
	// it.
	if werr := f.gate.wait(ctx); werr != nil {
		return nil, werr
	}
	if f.dead.Load() {
		return nil, errDead
	}
	if err == nil {
		f.noteRead(req)
	}
	return resp, err
}

// SendRequestAsync is SendRequest's asynchronous form (client-go's
// batched reads may use it): no crash is injected (commits do not come
// this way), the rest alike.
func (f *faultyRPC) SendRequestAsync(ctx context.Context, addr string, req *tikvrpc.Request, cb async.Callback[*tikvrpc.Response]) {
	if isRead(req.Type) {
		f.gate.trip()
	}
	if err := f.gate.wait(ctx); err != nil {
		cb.Invoke(nil, err)
		return
	}
	if f.dead.Load() {
		cb.Invoke(nil, errDead)
		return
	}
	cb.Inject(func(resp *tikvrpc.Response, err error) (*tikvrpc.Response, error) {
		if werr := f.gate.wait(ctx); werr != nil {
			return nil, werr
		}
		if f.dead.Load() {
			return nil, errDead
		}
		if err == nil {
			f.noteRead(req)
		}
		return resp, err
	})
	f.Client.SendRequestAsync(ctx, addr, req, cb)
}

// die kills the process (once), counting the crash in c.
func (f *faultyRPC) die(c *atomic.Int64) {
	if f.dead.CompareAndSwap(false, true) {
		c.Add(1)
		f.crashed.Store(true)
	}
}

// Lock TTLs, in milliseconds: client-go's least (its locks live that
// long plus the time their transaction spent reading), and the soak's.
const (
	clientGoLockTTL = 3000
	soakLockTTL     = 200
)

// shortenTTL makes a prewrite's locks live soakLockTTL (plus the reading
// time client-go adds) instead of client-go's 3s, as a cluster's clients
// tuned for it would: a dead process's locks then block the others for a
// fifth of a second before their resolvers roll them back or forward, instead
// of stalling the soak, and a slow or paused live transaction has its
// locks resolved under it more often.
func shortenTTL(req *tikvrpc.Request) {
	if p := req.Prewrite(); p != nil && p.LockTtl >= clientGoLockTTL {
		p.LockTtl -= clientGoLockTTL - soakLockTTL
	}
}

// isRead reports whether a request reads a transaction's snapshot.
func isRead(t tikvrpc.CmdType) bool {
	return t == tikvrpc.CmdGet || t == tikvrpc.CmdBatchGet || t == tikvrpc.CmdBufferBatchGet || t == tikvrpc.CmdScan
}

// noteRead notes a read answered below the safe point a collection set
// out to reach.
func (f *faultyRPC) noteRead(req *tikvrpc.Request) {
	var ts uint64
	switch req.Type {
	case tikvrpc.CmdGet:
		ts = req.Get().GetVersion()
	case tikvrpc.CmdBatchGet:
		ts = req.BatchGet().GetVersion()
	case tikvrpc.CmdBufferBatchGet:
		ts = req.BufferBatchGet().GetVersion()
	case tikvrpc.CmdScan:
		ts = req.Scan().GetVersion()
	default:
		return
	}
	sp := f.passed.Load()
	if ts >= sp {
		return
	}
	f.fig.readsBelow.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.below[ts] = sp
}

// notePrewrite notes a prewrite of the transaction at ts sent below the
// safe point a collection set out to reach.
func (f *faultyRPC) notePrewrite(ts uint64) {
	if ts >= f.passed.Load() {
		return
	}
	f.fig.prewritesBelow.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prewrote[ts] = true
}

// prewroteBelow reports whether the transaction at ts sent a prewrite
// below a collection's safe point, forgetting it.
func (f *faultyRPC) prewroteBelow(ts uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := f.prewrote[ts]
	delete(f.prewrote, ts)
	return ok
}

// readBelow reports whether a read of the snapshot ts was answered below
// a collection's safe point, and which, forgetting it.
func (f *faultyRPC) readBelow(ts uint64) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sp, ok := f.below[ts]
	delete(f.below, ts)
	return sp, ok
}
