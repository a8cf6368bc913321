// Package tikvengine is the framework's engine whose transactions are
// TiKV's own: a framework transaction is one client-go optimistic
// transaction (txnkv), so that snapshot isolation, primary locks, lock
// resolution, async commit and one-phase commit, garbage collection and
// PD's timestamps are TiKV's, where the engine over a store.Store
// (internal/percolator) layers a second Percolator over TiKV and pays for
// every row transaction as a whole TiKV transaction.
//
// # Key layout
//
// Every key starts with the namespace prefix (Options.Namespace and a 0x00
// byte; the namespace holds no 0x00, so engines and stores of different
// namespaces share a cluster without sharing a key). After it, one byte
// names the key range, and the rest is package keys' order-preserving
// encoding:
//
//	data:          ns 0x01 esc(table) esc(row) esc(family) esc(qualifier)
//	notifications: ns 0x02 esc(table) esc(row) esc(family) esc(qualifier) ^writerStartTs
//	acks:          ns 0x03 esc(table) esc(row) esc(family) esc(qualifier) esc(observer)
//	imports:       ns 0x04 startTs commitTs (big-endian)
//
// A data key is one cell; TiKV keeps its versions. A notification key is
// one notifying write (or weak request), named by the writer's start
// timestamp and written in the writer's own transaction, so that it is
// committed exactly when the write is, settling removes exactly the keys a
// run saw, and a writer that notifies the cell again meanwhile writes
// another key instead of conflicting with the settling. Notifications live
// in their own range, so finding work never reads a data region, and acks
// in a third, so that neither data scans nor finding work read them.
// An import key records an import (see DB.Import) from its check on, so
// that a resume or a discard knows whether it may have written.
// Values are framed behind a tag byte, as TiKV refuses empty values.
package tikvengine
