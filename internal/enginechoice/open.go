package enginechoice

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/percolator"
	"github.com/trickle-dev/trickle/internal/tikvengine"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv"
)

// Open opens the engine c chose on st with cfg, for framework.Open.
//
// For TiKV that is the store's own transactions (one framework
// transaction is one TiKV transaction, with timestamps from PD, whatever
// or is), under tikv.EngineNamespace of the store's namespace, holding
// the store's GC barrier (see barrier); for Protocol, the framework's
// protocol over st's cells with timestamps from or.
func Open(ctx context.Context, st store.Store, or percolator.Oracle, c Choice, cfg engine.Config) (engine.Engine, error) {
	if c.TiKV != nil {
		return openTiKV(ctx, c.TiKV, cfg)
	}
	return percolator.New(st, or, &percolator.Options{
		WorkerID: cfg.WorkerID, Observed: cfg.Observed, Guards: cfg.Guards, DeclaredGuards: cfg.DeclaredGuards,
		Liveness: cfg.Liveness, Lease: cfg.Lease, Notified: cfg.Notified, LockTTL: cfg.LockTTL,
		MaxAttempts: cfg.MaxAttempts, RetryBackoffMin: cfg.RetryBackoffMin, RetryBackoffMax: cfg.RetryBackoffMax,
		Logger: cfg.Logger, TracerProvider: cfg.TracerProvider, MeterProvider: cfg.MeterProvider,
	})
}

// openTiKV opens the TiKV engine on s: its keys live under the store's
// namespace followed by a 0x01 byte and "txn", apart from the store's
// own, and the store keeps the framework's non-transactional records
// (failure records, published observers, backfill progress).
func openTiKV(ctx context.Context, s *tikv.Store, cfg engine.Config) (engine.Engine, error) {
	b, err := barrier(ctx, s, cfg.History)
	if err != nil {
		return nil, fmt.Errorf("store/tikv: holding a GC barrier for the transaction engine: %w", err)
	}
	o := s.Options()
	return tikvengine.New(s.Client(), &tikvengine.Options{
		Barrier:         b,
		Namespace:       tikv.EngineNamespace(o.Namespace),
		Store:           s,
		Observed:        cfg.Observed,
		Guards:          cfg.Guards,
		DeclaredGuards:  cfg.DeclaredGuards,
		Lease:           cfg.Lease,
		Notified:        cfg.Notified,
		WorkerID:        cfg.WorkerID,
		MaxAttempts:     cfg.MaxAttempts,
		RetryBackoffMin: cfg.RetryBackoffMin,
		RetryBackoffMax: cfg.RetryBackoffMax,
		RequestTimeout:  o.RequestTimeout,
		Logger:          cfg.Logger,
		TracerProvider:  cfg.TracerProvider,
		MeterProvider:   cfg.MeterProvider,
	})
}

// barriers are the GC barriers of the process's TiKV stores, one per
// store, set on PD by the store's first engine and deleted when the store
// closes (a store is in the map once it has that hook).
var barriers = struct {
	sync.Mutex
	m map[*tikv.Store]*tikvengine.Barrier
}{m: map[*tikv.Store]*tikvengine.Barrier{}}

// barrier returns s's GC barrier: every engine of the store registers its
// transactions with it, so that no collection on the cluster passes them,
// another deployment's included. history raises what it keeps for as-of
// reads. It fails with store.ErrClosed on a closed store.
func barrier(ctx context.Context, s *tikv.Store, history time.Duration) (*tikvengine.Barrier, error) {
	barriers.Lock()
	defer barriers.Unlock()
	b, hooked := barriers.m[s]
	if !hooked {
		err := s.OnClose(func() error {
			barriers.Lock()
			b := barriers.m[s]
			delete(barriers.m, s)
			barriers.Unlock()
			if b == nil {
				return nil
			}
			return b.Close()
		})
		if err != nil {
			return nil, err
		}
		barriers.m[s] = nil
	}
	if b == nil {
		o := s.Options()
		var err error
		b, err = tikvengine.NewBarrier(ctx, s.Client(), &tikvengine.BarrierOptions{
			Namespace: o.Namespace, TTL: o.BarrierTTL, History: history, RequestTimeout: o.RequestTimeout, Logger: o.Logger,
		})
		if err != nil {
			return nil, err
		}
		barriers.m[s] = b
	}
	b.WithHistory(history)
	return b, nil
}

// Notifications is what the readers of a store's notifications use of its
// engine.
type Notifications interface {
	Find(ctx context.Context, table string, start, end []byte) iter.Seq2[engine.Notification, error]
	Backlog(ctx context.Context, table string) iter.Seq2[engine.Waiting, error]
}

// NotificationsIn returns the notifications of the engine whose data st
// holds (the one recorded in it, else the one it declares; see Find).
//
// That is a TiKV store's own, or the framework's protocol's, read from
// the store's cells. It never guesses by st's type: a wrapper of a TiKV
// store that does not unwrap fails rather than show the protocol's empty
// key space.
func NotificationsIn(ctx context.Context, st store.Store) (Notifications, error) {
	c, err := Find(ctx, st)
	if err != nil {
		return nil, err
	}
	if c.TiKV != nil {
		return openTiKV(ctx, c.TiKV, engine.Config{})
	}
	return storeNotifications{st}, nil
}

// storeNotifications reads the notifications the framework's protocol
// keeps in a store's notify locality group.
type storeNotifications struct{ st store.Store }

func (s storeNotifications) Find(ctx context.Context, table string, start, end []byte) iter.Seq2[engine.Notification, error] {
	return percolator.FindIn(ctx, s.st, table, start, end)
}

func (s storeNotifications) Backlog(ctx context.Context, table string) iter.Seq2[engine.Waiting, error] {
	return percolator.BacklogIn(ctx, s.st, table)
}
