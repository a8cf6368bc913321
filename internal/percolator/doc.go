// Package percolator runs Percolator-style transactions: cross-row,
// cross-table snapshot-isolation transactions over a Bigtable-like store
// (package store), with timestamps from a timestamp oracle (package
// oracle).
//
// # Model
//
// A transaction reads a snapshot as of its start timestamp and buffers its
// writes. Commit is the paper's two-phase commit: every written cell is
// locked (prewrite) — the primary first — then a commit timestamp is drawn
// and the primary's lock is replaced by a write record in one single-row
// atomic operation. That operation is the commit point; the secondaries'
// write records follow and, should the committer die first, are rolled
// forward by whoever next meets their locks. A reader that meets a lock of a
// transaction whose owner is dead (per the Liveness service) or whose TTL
// has passed on the oracle's clock rolls it back, leaving a rollback record
// so that nothing of that transaction can commit later.
//
// The isolation level is snapshot isolation: no dirty or non-repeatable
// reads, no lost updates (of two concurrent writers of a cell, the first to
// commit wins and the other fails with ErrWriteConflict), but write skew is
// possible. It is not serializable.
//
// Use DB.Update for read-write work: it re-runs the function in a new
// transaction, at a new start timestamp, when a commit conflicts. DB.View
// runs a read-only snapshot.
package percolator
