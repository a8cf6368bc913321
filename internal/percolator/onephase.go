package percolator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// A store that writes several rows atomically at a commit timestamp it
// draws (store.AtomicApplier: store.DB.ApplyAtomic) lets a transaction
// commit in one phase. Percolator's two phases exist because Bigtable
// writes one row atomically and no more: the locks make a commit that
// spans rows look atomic to readers, and the primary's commit record
// decides it. A store that writes every row of a transaction at once
// needs neither. What the locks did for snapshots later than the commit
// timestamp (make them wait for the outcome) the store does itself: the
// rows are pending from before the timestamp is drawn until the write is
// visible, and reads of them wait. A store that cannot (a runner's, when
// another kind of store is in use) fails with an error matching
// errors.ErrUnsupported, having applied nothing.

// onePhaseRetry is how long a DB commits in two phases after its store
// said it could not commit in one, before it asks again (a runner may
// take over the store meanwhile).
const onePhaseRetry = time.Minute

// commitWrites commits the buffered writes: in one phase if the store can
// and the rows fit in one atomic write, else in two.
func (tx *Txn) commitWrites(ctx context.Context) error {
	db := tx.db
	if err := tx.markGuarded(); err != nil {
		return err
	}
	if db.atomic == nil || time.Now().UnixNano() < db.onePhaseOffUntil.Load() {
		return tx.twoPhaseCommit(ctx)
	}
	done, err := tx.onePhaseCommit(ctx)
	if !done {
		return tx.twoPhaseCommit(ctx)
	}
	return err
}

// onePhaseCommit writes every cell of the transaction as committed, its
// notifications with them, in one atomic store write at a commit
// timestamp the store draws from the oracle. done is false if the
// transaction must commit in two phases instead (too many rows, or the
// store cannot); nothing was written then.
func (tx *Txn) onePhaseCommit(ctx context.Context) (done bool, err error) {
	db := tx.db
	ms := tx.sortedWrites()
	pk := ms[0].key
	traceCtx := tx.traceCtxFor()
	extra, apart := tx.weakByWrite(ms, pk)
	rows := rowGroups(ms, 0)
	weakRows := weakRowTxns(tx.startTs, pk, apart, traceCtx)
	if len(rows)+len(weakRows) > db.opts.OnePhaseMaxRows {
		return false, nil
	}
	locks := make([]protocol.Lock, len(ms))
	for i, m := range ms {
		locks[i] = tx.lockFor(m, pk, 0)
	}
	txns := make([]*store.RowTxn, 0, len(rows)+len(weakRows))
	rel := make([]int, 0, cap(txns))
	for _, idx := range rows {
		cells := make([]protocol.PrewriteCell, len(idx))
		var notes []store.Mutation
		for j, i := range idx {
			cells[j] = protocol.PrewriteCell{Key: ms[i].key, Lock: &locks[i], Value: ms[i].value, Guarded: ms[i].guarded}
			notes = append(notes, tx.notifyFor(ms[i], pk)...)
			notes = append(notes, extra[i]...)
		}
		t, n := protocol.OnePhaseRow(cells, notes...)
		txns, rel = append(txns, t), append(rel, n)
	}
	for _, t := range weakRows {
		txns, rel = append(txns, t), append(rel, 0)
	}
	var waits int
	for {
		commitTs, res, err := db.atomic.ApplyAtomic(ctx, txns, rel, db.or)
		if errors.Is(err, errors.ErrUnsupported) {
			db.onePhaseOffUntil.Store(time.Now().Add(onePhaseRetry).UnixNano())
			return false, nil
		}
		if errors.Is(err, store.ErrNoTimestamp) {
			return true, fmt.Errorf("framework: one-phase commit of %d: nothing written: %w", tx.startTs, err)
		}
		if err != nil {
			// A store reached over a network may have written it.
			return true, fmt.Errorf("framework: one-phase commit of %d at %s: %w: %w", tx.startTs, pk, ErrCommitUnknown, err)
		}
		failed := -1
		for i := range res {
			if res[i].FailedCheck >= 0 {
				failed = i
				break
			}
		}
		if failed < 0 {
			tx.committedAt(commitTs)
			if tx.span.IsRecording() {
				tx.span.AddEvent("committed in one phase", trace.WithAttributes(attrCommitTs.Int64(int64(commitTs)), attribute.Int("trickle.txn.rows", len(txns))))
			}
			return true, tx.fault(StepOnePhaseCommitted)
		}
		ours, err := tx.clearPrewrite(ctx, "one-phase commit", txns[failed], res[failed], &waits)
		if err != nil {
			return true, err
		}
		if ours {
			// No one-phase commit locks: a lock at our start timestamp
			// means two transactions started at one timestamp.
			return true, fmt.Errorf("framework: one-phase commit of %d: %w: a lock of the same start timestamp in %s/%q", tx.startTs, protocol.ErrCorrupt, txns[failed].Table, txns[failed].Row)
		}
	}
}

// committedAt records that the transaction committed at commitTs.
func (tx *Txn) committedAt(commitTs uint64) {
	tx.db.committed.add(tx.startTs, commitTs)
	tx.db.saw(commitTs)
	tx.commitTs = commitTs
}

// traceCtxFor sets and returns the trace context the transaction's
// notifications carry.
func (tx *Txn) traceCtxFor() []byte {
	tx.traceCtx = traceParent(tx.span.SpanContext())
	return tx.traceCtx
}

// weakRowTxns are the row transactions that write the weak notifications
// of a transaction (started at startTs, with primary pk) on rows it does
// not write: one per row, naming the primary, so that they are removed
// only once the transaction's outcome is known.
func weakRowTxns(startTs uint64, pk protocol.Key, keys []protocol.Key, traceCtx []byte) []*store.RowTxn {
	if len(keys) == 0 {
		return nil
	}
	type tableRow struct{ table, row string }
	byRow := make(map[tableRow]*store.RowTxn, len(keys))
	var txns []*store.RowTxn
	for _, k := range keys {
		tr := tableRow{k.Table, string(k.Row)}
		t := byRow[tr]
		if t == nil {
			t = &store.RowTxn{Table: k.Table, Row: k.Row, NoSync: true}
			byRow[tr] = t
			txns = append(txns, t)
		}
		t.Mutations = append(t.Mutations, protocol.NotifyMutation(k.Column, startTs, pk, traceCtx))
	}
	return txns
}
