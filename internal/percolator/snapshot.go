package percolator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// A store whose serving process also serves the oracle can choose a
// read's timestamp itself (store.TimestampReader: remote.StoreClient's
// ReadRowsNow): a transaction over it gets its snapshot and its first read
// in one round trip instead of two, which is most of what a read-only
// transaction costs over the raw read (Figure 8), and an observer's run
// one round trip less. Its commit point gets its commit timestamp the same
// way (store.TimestampApplier: ApplyNow), so that a transaction that reads
// before it writes never calls the oracle. A store that cannot fails with
// an error matching errors.ErrUnsupported, having applied nothing, and the
// transaction draws from the oracle itself.

// chooses reports whether the store, if it has the methods, should be let
// choose timestamps now.
func (db *DB) chooses() bool {
	return db.chooser == nil || db.chooser.ChoosesTimestamps()
}

// saw records a timestamp the oracle gave: the highest is the floor at
// which a transaction whose snapshot is not chosen yet enters the active
// set (a lazy one, or one drawing its timestamp; see enterFloor).
func (db *DB) saw(ts uint64) {
	for cur := db.seenTs.Load(); ts > cur && !db.seenTs.CompareAndSwap(cur, ts); cur = db.seenTs.Load() {
	}
}

// beginLazy starts a transaction whose snapshot its first read chooses in
// the store (see store.TimestampReader); one that commits without reading draws it
// from the oracle first. Until then it is registered in the
// active set at a floor no later than any timestamp the oracle can still
// give: the highest this DB has seen, or the safe point, both of which the
// oracle gave before, and at least 1 (OldestActive's 0 means none). A
// garbage collection thus never passes the snapshot the transaction will
// get, and the floor keeps rising with the transactions that run, so that
// a stream of reads does not hold the safe point back.
func (db *DB) beginLazy(ctx context.Context, attempt int) (context.Context, *Txn, error) {
	ctx, span := db.tracer.Start(ctx, "txn")
	if attempt > 0 && span.IsRecording() {
		span.SetAttributes(attrAttempt.Int(attempt))
	}
	term, err := db.leaseTerm()
	if err != nil {
		endSpanError(span, err)
		return ctx, nil, err
	}
	floor := db.enterFloor()
	return ctx, &Txn{db: db, entered: floor, lazy: true, term: term, begun: time.Now(), span: span}, nil
}

// enterFloor registers a transaction in the active set at a floor no
// later than any timestamp the oracle can still give (see beginLazy) and
// returns it: from then on, OldestActive covers whatever snapshot the
// transaction gets.
func (db *DB) enterFloor() uint64 {
	for {
		floor := max(db.seenTs.Load(), db.active.safePoint.Load(), 1)
		// enter fails only if the safe point passed the floor meanwhile;
		// the next floor is at least that safe point.
		if _, ok := db.active.enter(floor); ok {
			return floor
		}
	}
}

// setStart fixes a lazy transaction's snapshot at ts.
func (tx *Txn) setStart(ts uint64) {
	tx.startTs, tx.lazy = ts, false
	tx.db.saw(ts)
	if tx.span.IsRecording() {
		tx.span.SetAttributes(attrStartTs.Int64(int64(ts)))
	}
}

// pin chooses a lazy transaction's snapshot by drawing a timestamp from
// the oracle, for reads that cannot let the store choose it (scans, a
// store that cannot) and for a commit that read nothing. It does nothing
// once the snapshot is chosen.
func (tx *Txn) pin(ctx context.Context) error {
	if !tx.lazy {
		return nil
	}
	ts, err := tx.db.or.Timestamp(ctx)
	if err != nil {
		return fmt.Errorf("framework: begin: %w", err)
	}
	tx.setStart(ts)
	return tx.checkSnapshot()
}

// readRows reads reads, built with protocol.ReadSpans(tx.startTs), in the
// transaction's snapshot. The first read of a lazy transaction chooses the
// snapshot: in the store if it can, else from the oracle first.
func (tx *Txn) readRows(ctx context.Context, reads []store.RowRead) ([][]store.Cell, error) {
	if !tx.lazy {
		return tx.db.st.ReadRows(ctx, reads)
	}
	ts, res, err := tx.db.now.ReadRowsNow(ctx, reads, protocol.ReadSpansNow)
	if errors.Is(err, errors.ErrUnsupported) {
		if err := tx.pin(ctx); err != nil {
			return nil, err
		}
		for i := range reads {
			reads[i].Spans = protocol.ReadSpans(tx.startTs)
		}
		return tx.db.st.ReadRows(ctx, reads)
	}
	if err != nil {
		return nil, err
	}
	tx.setStart(ts)
	if err := tx.checkSnapshot(); err != nil {
		return nil, err
	}
	return res, nil
}
