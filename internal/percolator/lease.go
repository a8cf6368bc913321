package percolator

import (
	"fmt"

	"github.com/trickle-dev/trickle/internal/engine"
)

// Lease is this process's standing with the deployment's garbage
// collector: while it holds, the collector counts what the process reports
// of its running transactions (their oldest start), so no collection
// passes one of them. A process paused, or cut off from the liveness
// service, longer than its lease lets it lapse; the collector may then
// pass its transactions, and a read of theirs could see a snapshot the
// collection thinned. cluster.Liveness implements it.
type Lease = engine.Lease

// ErrLeaseLost is matched by the error of a transaction that this
// process's lease (Options.Lease) does not protect: begun while the lease
// had lapsed, or whose reads ended after it lapsed (those fail with
// ErrSnapshotTooOld as well). It matches store.ErrUnavailable too: the
// process cannot transact safely until its liveness is restored, which it
// does by itself, so callers wait and try again as they do when the store
// is out of reach.
var ErrLeaseLost = engine.ErrLeaseLost

// leaseTerm returns the term of the lease a transaction begins in, or
// ErrLeaseLost if it does not hold. Without a lease, every transaction is
// in term 0.
func (db *DB) leaseTerm() (uint64, error) {
	if db.opts.Lease == nil {
		return 0, nil
	}
	term, ok := db.opts.Lease.Held()
	if !ok {
		return 0, fmt.Errorf("framework: begin: %w", ErrLeaseLost)
	}
	return term, nil
}

// verify says whether what the transaction has read so far is its
// snapshot: no collection passed it. It is checked after each read: the
// safe point this process knows must not be above the snapshot, and the
// lease the transaction began in must still hold. Checked after the read
// rather than before, it covers a process paused between the two.
func (tx *Txn) verify() error {
	if err := tx.checkSnapshot(); err != nil {
		return err
	}
	if tx.db.opts.Lease == nil {
		return nil
	}
	if term, ok := tx.db.opts.Lease.Held(); !ok || term != tx.term {
		return fmt.Errorf("%w: start %d: %w", ErrSnapshotTooOld, tx.startTs, ErrLeaseLost)
	}
	return nil
}
