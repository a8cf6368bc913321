package tikvtest

import (
	"context"
	"math"
	"sync"
	"time"

	pdgc "github.com/tikv/pd/client/clients/gc"
)

// barriers gives the mock PD's GC barriers the TTLs PD gives them: the
// mock keeps a barrier until it is deleted, whatever its TTL, so that a
// process that died holding one would hold back every collection on the
// cluster for good; PD drops a barrier its TTL after it was last set.
// Time is PD's clock, moved by AdvanceClock.
type barriers struct {
	mu      sync.Mutex
	expires map[string]time.Time // barrier id -> when PD drops it
}

// pdNow is the time on PD's clock.
func (c *Cluster) pdNow() time.Time {
	return time.Now().Add(time.Duration(c.clockAhead.Load()) * time.Millisecond)
}

func (b *barriers) set(id string, now time.Time, ttl time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.expires == nil {
		b.expires = map[string]time.Time{}
	}
	if ttl == time.Duration(math.MaxInt64) {
		delete(b.expires, id) // never expires
		return
	}
	b.expires[id] = now.Add(ttl)
}

func (b *barriers) forget(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.expires, id)
}

// expired returns the barriers whose TTL ran out by now, forgetting them.
func (b *barriers) expired(now time.Time) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for id, at := range b.expires {
		if !now.Before(at) {
			out = append(out, id)
			delete(b.expires, id)
		}
	}
	return out
}

// dropExpired deletes the barriers whose TTL ran out from the mock PD.
func (c *Cluster) dropExpired(ctx context.Context, states pdgc.GCStatesClient) error {
	for _, id := range c.barriers.expired(c.pdNow()) {
		if _, err := states.DeleteGCBarrier(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// GetGCStatesClient keeps the TTLs of the barriers set through it.
func (t *timestamps) GetGCStatesClient(keyspaceID uint32) pdgc.GCStatesClient {
	return &gcStates{GCStatesClient: t.Client.GetGCStatesClient(keyspaceID), c: t.c}
}

// GetGCInternalController drops expired barriers before the safe point
// moves.
func (t *timestamps) GetGCInternalController(keyspaceID uint32) pdgc.InternalController {
	return &gcController{InternalController: t.Client.GetGCInternalController(keyspaceID), states: t.Client.GetGCStatesClient(keyspaceID), c: t.c}
}

type gcStates struct {
	pdgc.GCStatesClient
	c *Cluster
}

func (g *gcStates) SetGCBarrier(ctx context.Context, id string, ts uint64, ttl time.Duration) (*pdgc.GCBarrierInfo, error) {
	now := g.c.pdNow()
	if err := g.c.dropExpired(ctx, g.GCStatesClient); err != nil {
		return nil, err
	}
	info, err := g.GCStatesClient.SetGCBarrier(ctx, id, ts, ttl)
	if err == nil {
		g.c.barriers.set(id, now, ttl)
	}
	return info, err
}

func (g *gcStates) DeleteGCBarrier(ctx context.Context, id string) (*pdgc.GCBarrierInfo, error) {
	info, err := g.GCStatesClient.DeleteGCBarrier(ctx, id)
	if err == nil {
		g.c.barriers.forget(id)
	}
	return info, err
}

func (g *gcStates) GetGCState(ctx context.Context) (pdgc.GCState, error) {
	if err := g.c.dropExpired(ctx, g.GCStatesClient); err != nil {
		return pdgc.GCState{}, err
	}
	return g.GCStatesClient.GetGCState(ctx)
}

type gcController struct {
	pdgc.InternalController
	states pdgc.GCStatesClient
	c      *Cluster
}

func (g *gcController) AdvanceTxnSafePoint(ctx context.Context, target uint64) (pdgc.AdvanceTxnSafePointResult, error) {
	if err := g.c.dropExpired(ctx, g.states); err != nil {
		return pdgc.AdvanceTxnSafePointResult{}, err
	}
	return g.InternalController.AdvanceTxnSafePoint(ctx, target)
}
