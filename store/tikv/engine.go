package tikv

import (
	"context"
	"fmt"
	"time"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvengine"
)

var _ engine.Native = (*Store)(nil)

// TransactionEngine is how framework.Open runs framework transactions on
// this store's cluster: each one is a TiKV transaction of its own (see
// internal/tikvengine), rather than the framework's protocol run over the
// store's cells. Programs open a framework.DB on the store instead of
// calling it. The engine's keys live under the store's namespace followed
// by a 0x01 byte and "txn", apart from the store's own; the store keeps
// the framework's non-transactional records (failure records, published
// observers, backfill progress).
func (s *Store) TransactionEngine(ctx context.Context, c engine.Config) (engine.Engine, error) {
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	b, err := s.barrier(ctx, c.History)
	if err != nil {
		return nil, fmt.Errorf("store/tikv: holding a GC barrier for the transaction engine: %w", err)
	}
	return tikvengine.New(s.kv, &tikvengine.Options{
		Barrier:         b,
		Namespace:       EngineNamespace(s.o.Namespace),
		Store:           s,
		Observed:        c.Observed,
		Guards:          c.Guards,
		DeclaredGuards:  c.DeclaredGuards,
		Lease:           c.Lease,
		Notified:        c.Notified,
		WorkerID:        c.WorkerID,
		MaxAttempts:     c.MaxAttempts,
		RetryBackoffMin: c.RetryBackoffMin,
		RetryBackoffMax: c.RetryBackoffMax,
		RequestTimeout:  s.o.RequestTimeout,
		Logger:          c.Logger,
		TracerProvider:  c.TracerProvider,
		MeterProvider:   c.MeterProvider,
	})
}

// barrier returns the store's GC barrier, set on PD by the first call and
// deleted by Close: every engine of the store registers its transactions
// with it, so that no collection on the cluster passes them, another
// deployment's included. history raises what it keeps for as-of reads.
func (s *Store) barrier(ctx context.Context, history time.Duration) (*tikvengine.Barrier, error) {
	s.barrierMu.Lock()
	defer s.barrierMu.Unlock()
	if s.gcBarrier == nil {
		b, err := tikvengine.NewBarrier(ctx, s.kv, &tikvengine.BarrierOptions{
			Namespace: s.o.Namespace, TTL: s.o.BarrierTTL, History: history, RequestTimeout: s.o.RequestTimeout, Logger: s.log,
		})
		if err != nil {
			return nil, err
		}
		s.gcBarrier = b
	}
	s.gcBarrier.WithHistory(history)
	return s.gcBarrier, nil
}

// EngineNamespace is the namespace of the transaction engine on a store
// of namespace ns: ns, a 0x01 byte and "txn". No store's keys start with
// it followed by 0x00 unless its namespace is that very string.
func EngineNamespace(ns string) string { return ns + "\x01txn" }
