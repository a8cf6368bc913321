package main

import (
	"context"
	"sync"
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
