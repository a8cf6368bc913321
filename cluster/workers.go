package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// This file answers questions about other workers from their tokens:
// Alive (cached, for lock resolution), Workers and ClusterOldestActive.

// aliveEntry is a cached Alive answer.
type aliveEntry struct {
	alive bool
	until time.Time
}

// maxAliveCache bounds Alive's cache; past it, stale entries are dropped
// (and, if that is not enough, all of them).
const maxAliveCache = 4096

// Alive reports whether holder's token exists, i.e. whether it refreshed
// within its TTL (enforced by the server, which removes a token up to about
// a second late). An unknown holder is dead. Answers are cached for
// CacheFor. On error it returns false with the error; framework callers
// then presume the holder alive and fall back to the lock TTL.
func (l *Liveness) Alive(ctx context.Context, holder string) (bool, error) {
	key, ok := workerKey(holder)
	if !ok {
		return false, nil
	}
	if alive, ok := l.cached(holder); ok {
		return alive, nil
	}
	_, err := l.kv.Get(ctx, key)
	if err != nil && !notFound(err) {
		return false, fmt.Errorf("cluster: liveness of %q: %w", holder, err)
	}
	alive := err == nil
	l.remember(holder, alive)
	return alive, nil
}

func (l *Liveness) cached(holder string) (alive, ok bool) {
	if l.opts.CacheFor <= 0 {
		return false, false
	}
	l.cacheMu.Lock()
	defer l.cacheMu.Unlock()
	e, ok := l.cache[holder]
	if !ok || l.now().After(e.until) {
		return false, false
	}
	return e.alive, true
}

func (l *Liveness) remember(holder string, alive bool) {
	if l.opts.CacheFor <= 0 {
		return
	}
	now := l.now()
	l.cacheMu.Lock()
	defer l.cacheMu.Unlock()
	if len(l.cache) >= maxAliveCache {
		for h, e := range l.cache {
			if now.After(e.until) {
				delete(l.cache, h)
			}
		}
		if len(l.cache) >= maxAliveCache {
			clear(l.cache)
		}
	}
	l.cache[holder] = aliveEntry{alive: alive, until: now.Add(l.opts.CacheFor)}
}

func (l *Liveness) forget(holder string) {
	l.cacheMu.Lock()
	delete(l.cache, holder)
	l.cacheMu.Unlock()
}

// WorkerInfo describes a live worker, for status displays and for finding
// the cluster's oldest running transaction.
type WorkerInfo struct {
	// ID is the worker ID, as lock holders name it.
	ID string
	// Info is what the worker registered about itself (e.g. host and pid).
	Info string
	// LastRefresh is when the token was last written, on the server's clock.
	LastRefresh time.Time
	// TTL is how long after LastRefresh the token expires.
	TTL time.Duration
	// OldestActive is the start timestamp of the worker's oldest running
	// transaction as of LastRefresh, or 0 if it reported none.
	OldestActive uint64
	// Instance tells incarnations of one worker ID apart (random per
	// process).
	Instance string
	// Writes numbers the token's last write since its worker registered
	// (or registered again after its token expired), from 1.
	Writes uint64
	// Scans tells that the worker runs scanners (LivenessOptions.Scans).
	Scans bool
}

// Workers lists the live workers, sorted by ID, for a status command and
// for ClusterOldestActive. It reads the whole bucket in one pass.
func (l *Liveness) Workers(ctx context.Context) ([]WorkerInfo, error) {
	return listWorkers(ctx, l.kv, l.log)
}

// ListWorkers lists the live workers registered in bucket without
// registering the caller, for status tools.
func ListWorkers(ctx context.Context, js jetstream.JetStream, bucket string) ([]WorkerInfo, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil // no worker ever registered
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: list workers: %w", err)
	}
	return listWorkers(ctx, kv, slog.Default())
}

func listWorkers(ctx context.Context, kv jetstream.KeyValue, log *slog.Logger) ([]WorkerInfo, error) {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("cluster: list workers: %w", err)
	}
	defer func() { _ = w.Stop() }()
	var out []WorkerInfo
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("cluster: list workers: %w", ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("cluster: list workers: watch ended early")
			}
			if e == nil { // all current values delivered
				slices.SortFunc(out, func(a, b WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
				return out, nil
			}
			var t token
			if err := json.Unmarshal(e.Value(), &t); err != nil {
				log.Warn("skipping malformed liveness token", "key", e.Key(), "err", err)
				continue
			}
			out = append(out, WorkerInfo{
				ID:           t.ID,
				Info:         t.Info,
				LastRefresh:  e.Created(),
				TTL:          time.Duration(t.TTLSeconds) * time.Second,
				OldestActive: t.OldestActive,
				Instance:     t.Instance,
				Writes:       t.Writes,
				Scans:        t.Scans,
			})
		}
	}
}

// ErrStaleToken is returned by ClusterOldestActive when a live worker's
// token may not have been computed since the earlier listing: what it
// reports may predate transactions it began since, so no safe point can
// rest on it.
var ErrStaleToken = errors.New("cluster: a worker's token was not rewritten twice since the earlier listing")

// ClusterOldestActive returns the smallest OldestActive over live workers,
// a bound for a cluster-wide garbage collection safe point; ok is false if
// no live worker reports a running transaction.
//
// A token tells what its worker ran when its payload was computed, just
// before the write. So a collector draws a timestamp from the oracle,
// lists the workers (since), waits more than twice RefreshInterval and
// calls this with that listing. Each token must then come from a write
// whose payload was computed after that listing, or the call fails with
// ErrStaleToken naming its worker (its refreshes are failing, or slow;
// try a later round). A worker writes its token one write at a time, so
// the payload of the second write that the listing did not see was
// computed after the first had landed, after the listing: a token counts
// if its Writes are at least two more than the listing saw, or, for a
// worker the listing did not show under the same instance (it registered
// since), at least 2. Such a token reports every transaction its worker
// began before the timestamp and still runs, since a transaction enters
// its process's active set before it draws its own. A worker gone since
// cannot commit (its locks are rolled back once its token is gone).
func (l *Liveness) ClusterOldestActive(ctx context.Context, since []WorkerInfo) (ts uint64, ok bool, err error) {
	ws, err := l.Workers(ctx)
	if err != nil {
		return 0, false, err
	}
	before := make(map[string]WorkerInfo, len(since))
	for _, w := range since {
		before[w.ID] = w
	}
	for _, w := range ws {
		b, listed := before[w.ID]
		if !computedSince(b, listed, w) {
			return 0, false, fmt.Errorf("%w: worker %q (%s), write %d, last %s", ErrStaleToken, w.ID, w.Info, w.Writes, w.LastRefresh.Format(time.RFC3339))
		}
		if w.OldestActive != 0 && (!ok || w.OldestActive < ts) {
			ts, ok = w.OldestActive, true
		}
	}
	return ts, ok, nil
}

// computedSince reports whether the token w was computed after a listing
// that showed before (listed: whether it showed the worker at all): its
// write count grew by two since, in the same registration, or reached 2 in
// a registration the listing did not see (a worker that registered since,
// or registered again after its token expired, counting from 1 again).
func computedSince(before WorkerInfo, listed bool, w WorkerInfo) bool {
	if listed && before.Instance == w.Instance && w.Writes >= before.Writes {
		return w.Writes >= before.Writes+2
	}
	return w.Writes >= 2
}

// ReportsWait is how long a collector waits between its first listing and
// ClusterOldestActive: two refreshes of every token, and a second for the
// writes under way.
func (l *Liveness) ReportsWait() time.Duration { return 2*l.opts.RefreshInterval + time.Second }
