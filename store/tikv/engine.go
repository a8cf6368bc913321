package tikv

import (
	"context"

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
	return tikvengine.New(s.kv, &tikvengine.Options{
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

// EngineNamespace is the namespace of the transaction engine on a store
// of namespace ns: ns, a 0x01 byte and "txn". No store's keys start with
// it followed by 0x00 unless its namespace is that very string.
func EngineNamespace(ns string) string { return ns + "\x01txn" }
