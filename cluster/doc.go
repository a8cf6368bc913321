// Package cluster is the NATS plumbing that lets several trickle workers
// cooperate: an embedded nats-server for single-machine deployments and
// tests, a client for external clusters, worker liveness tokens (so that a
// lock resolver can roll back a dead worker's locks at once instead of
// waiting for their TTL, and so that garbage collection can find the oldest
// transaction still running anywhere), and cheap advisory row locks that
// keep scanners from doing the same work twice.
//
// Everything here is ephemeral coordination state kept in JetStream
// key-value buckets with memory storage: losing it costs performance (a lock
// waits for its TTL, two scanners run the same observer), never correctness,
// which the Percolator protocol in package framework guarantees by itself.
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
