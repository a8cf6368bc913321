// Package cluster is the NATS plumbing that lets several trickle workers
// cooperate: an embedded nats-server for single-machine deployments and
// tests, a client for external clusters (configured by the TRICKLE_NATS_*
// environment variables), worker liveness tokens (so that a lock resolver
// can roll back a dead worker's locks at once instead of waiting for their
// TTL, and so that garbage collection can find the oldest transaction still
// running anywhere), and cheap advisory row locks that keep scanners from
// doing the same work twice.
//
// Everything here is ephemeral coordination state kept in JetStream
// key-value buckets with memory storage: losing it costs performance (a lock
// waits for its TTL, two scanners run the same observer), never correctness,
// which the transaction engine (internal/percolator) guarantees by itself.
//
// Everything that crosses NATS, the store's pages included, is readable by
// any client the server admits, and its requests can change the store. So
// the embedded server admits only clients holding the user NKey kept in the
// data directory (see LocalCredentials), listens on loopback only, and
// starts without authentication only when told to (InsecureNoAuth). For
// external clusters, Connect supports every NATS way of authenticating
// (credentials files, NKeys, user and password, tokens, TLS client
// certificates), checks the files named before connecting, and gives up at
// once, with ErrAuthentication, when a server refuses the client.
//
// Expiry uses JetStream per-message TTLs (nats-server 2.11 or later): each
// liveness token and row lock is written with its own TTL and disappears on
// the server when its holder stops refreshing it, without any sweeper.
package cluster

import "errors"

// ErrInvalidOptions is wrapped by every error an options Validate method
// returns, so callers can tell a configuration mistake from a runtime
// failure.
var ErrInvalidOptions = errors.New("cluster: invalid options")
