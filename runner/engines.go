package runner

import (
	"context"
	"sync"
	"time"

	"github.com/trickle-dev/trickle/internal/engine"
)

// engines are the transaction engines a Node opened. The Node reports
// their oldest running transaction in its liveness token, so that a
// collection anywhere in the deployment keeps what they may still read,
// and moves their safe point up to the one collections persist, so that a
// transaction a collection passed anyway (its process had stopped
// reporting) fails instead of reading a thinned snapshot.
type engines struct {
	mu   sync.Mutex
	list []engine.Engine
}

func (e *engines) add(db engine.Engine) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, db)
}

func (e *engines) snapshot() []engine.Engine {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.list
}

// oldestActive is the start timestamp of the oldest transaction running
// in any of the engines, 0 if none is: what the liveness token reports.
func (e *engines) oldestActive() uint64 {
	var oldest uint64
	for _, db := range e.snapshot() {
		if ts := db.OldestActive(); ts != 0 && (oldest == 0 || ts < oldest) {
			oldest = ts
		}
	}
	return oldest
}

// adoptSafePoint moves every engine's safe point up to the persisted one.
func (e *engines) adoptSafePoint(ctx context.Context) error {
	for _, db := range e.snapshot() {
		if _, err := db.AdoptSafePoint(ctx); err != nil {
			return err
		}
	}
	return nil
}

// followSafePoint adopts the persisted safe point into the node's engines
// every interval until ctx ends. A failed read is retried at the next
// round: until then the engines keep the safe point they had.
func (n *Node) followSafePoint(ctx context.Context, interval time.Duration) {
	every(ctx, interval, func() bool {
		if err := n.engines.adoptSafePoint(ctx); err != nil && ctx.Err() == nil {
			n.log.Debug("reading the collection's safe point", "err", err)
		}
		return true
	})
}
