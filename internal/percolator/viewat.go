package percolator

import (
	"context"
	"fmt"

	"github.com/trickle-dev/trickle/internal/engine"
)

// ErrFutureSnapshot is returned by ViewAt for a timestamp the oracle has
// not reached yet: commits below it may still happen, so what a read
// finds there could change.
var ErrFutureSnapshot = engine.ErrFutureSnapshot

// ViewAt runs fn in a read-only transaction whose snapshot is at ts, a
// timestamp at or below one the oracle has already handed out: the store
// as it was then. A past snapshot is only whole while no garbage
// collection has passed it, so ViewAt refuses ts below the safe point
// with ErrSnapshotTooOld — this DB's, and the one the last collection
// persisted, which another process may have raised — and, like BeginAt,
// registers ts among the running transactions for as long as fn runs, so
// that no collection this process reports to passes it. A collection that
// had already drawn its safe point when ViewAt registered may still pass
// it; ViewAt reads the persisted safe point again once fn returned and
// fails with ErrSnapshotTooOld if it did, since fn may then have read a
// thinned snapshot: the caller discards what fn produced. A timestamp above
// every one the oracle handed out fails with ErrFutureSnapshot.
func (db *DB) ViewAt(ctx context.Context, ts uint64, fn func(ctx context.Context, tx *Txn) error) error {
	if ts == 0 {
		return fmt.Errorf("%w: ViewAt: timestamp 0 is before any snapshot", ErrSnapshotTooOld)
	}
	if ts > db.seenTs.Load() {
		now, err := db.or.Timestamp(ctx)
		if err != nil {
			return fmt.Errorf("framework: ViewAt: %w", err)
		}
		db.saw(now)
		if ts > now {
			return fmt.Errorf("%w: %d is after the oracle's latest timestamp %d", ErrFutureSnapshot, ts, now)
		}
	}
	ctx, span := db.tracer.Start(ctx, "txn")
	tx, err := db.BeginAt(ts)
	if err != nil {
		endSpanError(span, err)
		return err
	}
	tx.span = span
	if span.IsRecording() {
		span.SetAttributes(attrStartTs.Int64(int64(ts)))
	}
	tx.managed, tx.readOnly = true, true
	defer tx.discard()
	if err := db.passed(ctx, ts); err != nil {
		return err
	}
	err = fn(ctx, tx)
	if perr := db.passed(ctx, ts); perr != nil {
		if err != nil {
			return fmt.Errorf("%w (the view's own error: %v)", perr, err)
		}
		return perr
	}
	return err
}

// passed fails with ErrSnapshotTooOld if the safe point the last
// collection persisted is above ts, and moves this DB's safe point up to
// it.
func (db *DB) passed(ctx context.Context, ts uint64) error {
	sp, err := db.AdoptSafePoint(ctx)
	if err != nil {
		return fmt.Errorf("framework: ViewAt: %w", err)
	}
	if ts < sp {
		return fmt.Errorf("%w: snapshot %d is below safe point %d: the versions it reads may have been collected", ErrSnapshotTooOld, ts, sp)
	}
	return nil
}
