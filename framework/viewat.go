package framework

import (
	"context"
	"fmt"
	"time"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/oracle"
)

// ViewAt runs fn in a read-only transaction whose snapshot is at ts: the
// whole store as it was when the oracle handed ts out, for reading results
// as of a past moment (SQL's AS OF). TimestampAt turns a wall-clock time
// into such a timestamp.
//
// History lasts until garbage collection removes the versions no snapshot
// above its safe point reads (see package admin, and the runner's
// -gc-lag): ViewAt below the safe point fails with ErrSnapshotTooOld. So
// does ViewAt before the store was first opened (recorded since stores
// record it), collected or not: a time the store cannot show is refused
// the same way whether a collection ran yet or not.
// While fn runs, the snapshot counts as one of this process's running
// transactions, so no collection that hears of it passes it; one that had
// already drawn its safe point may, and then ViewAt fails with
// ErrSnapshotTooOld after fn returned, and whatever fn made of its reads
// must be discarded. A timestamp the oracle has not reached yet fails with
// ErrFutureSnapshot.
func (db *DB) ViewAt(ctx context.Context, ts uint64, fn func(ctx context.Context, tx *Txn) error) error {
	if born := (*engine.DB)(db).Born(); ts != 0 && ts < born {
		return fmt.Errorf("%w: %d (%s) is before the store was first opened, at %d (%s): it holds nothing that old",
			ErrSnapshotTooOld, ts, TimeOf(ts).UTC().Format(time.RFC3339Nano), born, TimeOf(born).UTC().Format(time.RFC3339Nano))
	}
	return db.engine().Transact(ctx, engine.TxnOptions{ReadOnly: true, At: ts}, front(fn))
}

// TimestampAt returns the timestamp of the store as it was at t: the
// largest one the oracle can hand out before t's millisecond, so a
// snapshot there (DB.ViewAt) holds every commit the oracle stamped before
// t, on the oracle's clock. The oracle's timestamps carry its clock in
// their high bits (see package oracle); on TiKV, PD's are laid
// out the same way. For t in the past the oracle has always handed that
// timestamp out already; for now or later it has not (ErrFutureSnapshot)
// unless its clock runs ahead of this machine's.
func TimestampAt(t time.Time) uint64 {
	return oracle.Compose(t.UnixMilli(), 0) - 1
}

// TimeOf returns the oracle's wall-clock time in ts, to the millisecond:
// the inverse of TimestampAt, for showing when a snapshot was.
func TimeOf(ts uint64) time.Time { return oracle.Physical(ts) }
