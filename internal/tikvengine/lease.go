package tikvengine

import (
	"fmt"

	"github.com/trickle-dev/trickle/internal/engine"
)

// leaseTerm returns the term of the lease a transaction begins in, or an
// error matching engine.ErrLeaseLost if it does not hold. Without a
// lease, every transaction is in term 0.
func (db *DB) leaseTerm() (uint64, error) {
	if db.opts.Lease == nil {
		return 0, nil
	}
	term, ok := db.opts.Lease.Held()
	if !ok {
		return 0, fmt.Errorf("tikvengine: begin: %w", engine.ErrLeaseLost)
	}
	return term, nil
}

// verify says whether what the transaction read so far is its snapshot:
// checked after each read, so that it covers a process paused between
// the check and the read. The snapshot must not be below the safe point
// this DB knows (client-go checks its own copy too, refreshed on its own
// schedule), the process's GC barrier must surely hold (or another
// deployment's collection may have passed it), and the lease the transaction began in must still hold: once
// it lapsed, the runners' collections no longer count this process's
// transactions and TiKV may have dropped versions the snapshot reads.
func (tx *Txn) verify() error {
	if sp := tx.db.safePoint.Load(); tx.startTs < sp {
		return fmt.Errorf("tikvengine: start %d: %w: below the safe point %d", tx.startTs, engine.ErrSnapshotTooOld, sp)
	}
	if b := tx.db.opts.Barrier; b != nil && !b.holds(tx.barrierTerm) {
		return fmt.Errorf("tikvengine: start %d: %w: %w", tx.startTs, engine.ErrSnapshotTooOld, errBarrierLapsed)
	}
	if tx.db.opts.Lease == nil {
		return nil
	}
	if term, ok := tx.db.opts.Lease.Held(); !ok || term != tx.term {
		return fmt.Errorf("tikvengine: start %d: %w: %w", tx.startTs, engine.ErrSnapshotTooOld, engine.ErrLeaseLost)
	}
	return nil
}
