package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/internal/retry"
	"github.com/trickle-dev/trickle/oracle"
)

// liveness is the in-process worlds' liveness service: a client process
// is alive until it crashes, and dead while it is paused past its TTL.
type liveness struct {
	mu   sync.Mutex
	dead map[string]bool
}

func newLiveness() *liveness { return &liveness{dead: map[string]bool{}} }

// Alive implements percolator.Liveness.
func (l *liveness) Alive(_ context.Context, holder string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.dead[holder], nil
}

func (l *liveness) kill(holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dead[holder] = true
}

func (l *liveness) revive(holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.dead, holder)
}

// lease is a client process's lease (percolator.Lease) as its liveness
// token would give it: lost while the process is paused past its TTL,
// taken again in a new term.
type lease struct {
	mu   sync.Mutex
	term uint64
	held bool
}

// Held implements percolator.Lease.
func (l *lease) Held() (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.term, l.held
}

func (l *lease) set(held bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = held
}

// renew registers the process again: a new term.
func (l *lease) renew() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.term++
	l.held = true
}

// gate is how a client process is paused (SIGSTOP, or starved): while it
// is, whatever the process does waits at the gate and stands still
// wherever it was.
type gate struct {
	mu      sync.Mutex
	resumed chan struct{} // nil while running; closed by resume
	// armed, unless nil, is closed by the next trip, which pauses there.
	armed chan struct{}
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pauseLocked()
}

func (g *gate) pauseLocked() {
	if g.armed != nil {
		close(g.armed)
		g.armed = nil
	}
	if g.resumed == nil {
		g.resumed = make(chan struct{})
	}
}

// arm makes the process pause at its next trip: the returned channel is
// closed once it paused (there, or by pause).
func (g *gate) arm() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed == nil {
		g.armed = make(chan struct{})
	}
	return g.armed
}

// trip pauses the process if it is armed: the process calls it as it
// reads, so that a pause stops it between the start of a transaction and
// the answer of one of its reads, where a collection that passes it
// makes the answer come from a snapshot it may have thinned.
func (g *gate) trip() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed != nil {
		g.pauseLocked()
	}
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resumed != nil {
		close(g.resumed)
		g.resumed = nil
	}
}

// wait blocks while the process is paused, or until ctx ends.
func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.resumed
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// crashOwner kills the owner: from now on nothing it answers arrives,
// and the store restarts from what its disk kept (what was synced).
func (w *world) crashOwner() error {
	w.view.down()
	clone := w.mem.CrashClone(vfs.CrashCloneCfg{})
	st, err := w.openOwner(clone)
	if err != nil {
		return fmt.Errorf("sicheck: the owner's store does not open after a crash: %w", err)
	}
	old := w.owner
	w.mem, w.owner = clone, st
	w.view.serve(st)
	w.fig.ownerCrashes.Add(1)
	go old.Close() // waits for what ran on it, whose answers are lost
	return nil
}

// passWithin bounds a pause: the paused client stays frozen until a
// collection passed the transaction it was running, or this long.
const passWithin = 4 * time.Second

// tripWithin bounds the wait for a client to pause at a read.
const tripWithin = time.Second

// pauseClient freezes a random live client past its liveness, as it next
// reads (or at once if it does not read within tripWithin): its token
// expires, collections pass its transactions (the others' transactions
// may hold the safe point back for a while: one waiting for the lock of a
// dead process, say), and it resumes, first without its lease, then
// registered again in a new term with the persisted safe point adopted,
// as its refresher would.
func (w *world) pauseClient(ctx context.Context) {
	c := w.randomClient()
	if c == nil {
		return
	}
	select {
	case <-c.gate.arm():
	case <-time.After(tripWithin):
		c.gate.pause()
	case <-ctx.Done():
		c.gate.pause()
	}
	c.lease.set(false)
	w.live.kill(c.id)
	oldest, limit := c.db.OldestActive(), time.Now().Add(passWithin)
	for {
		sp, ok := w.gcRound(ctx, c)
		if ok && oldest != 0 && sp > oldest {
			w.fig.pausesPassed.Add(1)
			break
		}
		if oldest == 0 || time.Now().After(limit) || retry.Sleep(ctx, 20*time.Millisecond) != nil {
			break
		}
	}
	c.gate.resume()
	if _, err := c.db.AdoptSafePoint(ctx); err != nil {
		w.log.Debug("a resumed client could not adopt the safe point yet", "err", err)
	}
	w.live.revive(c.id)
	c.lease.renew()
	w.fig.pauses.Add(1)
}

// resumeAll resumes every paused client.
func (w *world) resumeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.clients {
		c.gate.resume()
	}
}

func (w *world) randomClient() *client {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.clients {
		if !c.leaseless {
			return c // map order is random enough
		}
	}
	return nil
}

// gcRound collects below the oldest transaction of the live clients but
// skip (a paused one, whose token expired), and now less GCLag. It
// returns the safe point and whether the collection reached it.
func (w *world) gcRound(ctx context.Context, skip *client) (uint64, bool) {
	now, err := w.now(ctx)
	if err != nil {
		return 0, false
	}
	sp := oracle.Compose(oracle.PhysicalMillis(now)-w.cfg.GCLag.Milliseconds(), 0)
	w.mu.Lock()
	for c := range w.clients {
		if c != skip {
			if ts := c.db.OldestActive(); ts != 0 && ts < sp {
				sp = ts
			}
		}
	}
	w.mu.Unlock()
	if w.native != nil {
		w.native.passing(sp)
	}
	if _, err := w.collector.GC(ctx, sp); err != nil {
		w.log.Debug("gc", "err", err)
		return 0, false
	}
	w.fig.gcRounds.Add(1)
	return sp, true
}

// faults runs every fault at its interval until ctx ends.
func (w *world) faults(ctx context.Context) error {
	tick := func(d time.Duration) <-chan time.Time {
		if d <= 0 {
			return nil
		}
		return time.Tick(d)
	}
	owner, pause, gc := tick(w.cfg.OwnerCrashEvery), tick(w.cfg.PauseEvery), tick(w.cfg.GCEvery)
	if w.mem == nil {
		owner = nil // a TiKV cluster has no owner
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-owner:
			if err := w.crashOwner(); err != nil {
				return err
			}
		case <-pause:
			w.pauseClient(ctx)
		case <-gc:
			w.gcRound(ctx, nil)
		}
	}
}
