package oracle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Holds serve commits that leave nothing in the store for a reader to wait
// on. A two-phase commit locks its cells before it draws its commit
// timestamp, so a reader whose snapshot is later finds the locks and waits
// for the outcome. A one-phase commit (every cell of a transaction written
// as committed in one atomic store write, with no locks) has nothing of the
// kind: it is correct only if no snapshot above its commit timestamp can
// be read before its write is visible. Hold gives it such a timestamp: until
// the hold is released, every request that would be served a timestamp
// above it waits.
//
// The price is on readers only while a hold lasts, which is one store write
// in the process that serves this oracle; the fast path of Reserve gains
// one atomic load.

// ErrHoldUnsupported is returned by Hold where timestamps cannot be held:
// by a Client whose Reserver is not a Server in this process. It matches
// errors.ErrUnsupported, so a caller falls back to a commit that locks.
var ErrHoldUnsupported = fmt.Errorf("oracle: timestamps cannot be held here: %w", errors.ErrUnsupported)

// holds is a Server's set of held timestamps.
type holds struct {
	// n counts holds taken and not yet released. It is raised before the
	// held timestamp is reserved, so a Reserve that got a later timestamp
	// sees it (both go through the same compare-and-swap on next).
	n    atomic.Int64
	mu   sync.Mutex
	held map[uint64]chan struct{} // closed when released
}

// Hold returns a fresh timestamp, as Timestamp does, and holds it: no
// timestamp above it is served until release is called. The caller writes
// at it and then releases it, once the write is visible to readers or
// known not to have happened; release may be called more than once. Hold
// itself never waits for other holds.
func (s *Server) Hold(ctx context.Context) (ts uint64, release func(), err error) {
	h := &s.holds
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n.Add(1)
	ts, err = s.reserve(ctx, 1)
	if err != nil {
		h.n.Add(-1)
		return 0, nil, err
	}
	if h.held == nil {
		h.held = make(map[uint64]chan struct{})
	}
	released := make(chan struct{})
	h.held[ts] = released
	var once sync.Once
	return ts, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.held, ts)
			h.n.Add(-1)
			h.mu.Unlock()
			close(released)
		})
	}, nil
}

// Held returns how many timestamps are held now.
func (s *Server) Held() int { return int(s.holds.n.Load()) }

// waitHolds returns once no timestamp below first is held, or with an
// error naming the hold it waited for when ctx ends first.
func (s *Server) waitHolds(ctx context.Context, first uint64) error {
	h := &s.holds
	for {
		h.mu.Lock()
		var at uint64
		var released chan struct{}
		for ts, ch := range h.held {
			if ts < first && (released == nil || ts < at) {
				at, released = ts, ch
			}
		}
		h.mu.Unlock()
		if released == nil {
			return nil
		}
		select {
		case <-released:
		case <-ctx.Done():
			return fmt.Errorf("oracle: waiting for the commit held at %d to become visible: %w", at, ctx.Err())
		}
	}
}

// Hold holds a timestamp (see Server.Hold) when the Client's Reserver is
// a Server, directly: holds are not coalesced. Otherwise it fails with
// ErrHoldUnsupported.
func (c *Client) Hold(ctx context.Context) (uint64, func(), error) {
	h, ok := c.r.(interface {
		Hold(context.Context) (uint64, func(), error)
	})
	if !ok {
		return 0, nil, ErrHoldUnsupported
	}
	return h.Hold(ctx)
}
