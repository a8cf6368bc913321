package tikv

import (
	tikvclient "github.com/tikv/client-go/v2/tikv"

	"github.com/trickle-dev/trickle/store"
)

// What the TiKV transaction engine needs of the raw store: the engine
// (internal/tikvengine, which framework.Open builds) runs framework
// transactions as TiKV's own on the store's client, keeps the framework's
// non-transactional records in the store, and holds a GC barrier on PD
// that the store's Close deletes.

// Client returns the TiKV client the store runs on.
//
// The transaction engine's keys live under EngineNamespace of the store's
// namespace, apart from the store's own.
func (s *Store) Client() *tikvclient.KVStore { return s.kv }

// Options returns the options the store was opened with, defaults filled
// in.
func (s *Store) Options() Options { return s.o }

// OnClose has Close run f once the store's in-flight operations ended and
// before it closes a client it owns; an error of f is Close's.
//
// It is how what runs on the store's client (the transaction engine's GC
// barrier) ends with it. It fails with store.ErrClosed on a closed store.
func (s *Store) OnClose(f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.onClose = append(s.onClose, f)
	return nil
}

// EngineNamespace is the namespace of the transaction engine on a store
// of namespace ns: ns, a 0x01 byte and "txn".
//
// No store's keys start with it followed by 0x00 unless its namespace is
// that very string.
func EngineNamespace(ns string) string { return ns + "\x01txn" }
