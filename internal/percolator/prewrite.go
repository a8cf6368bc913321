package percolator

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

// sortedWrites returns the buffered writes in key order; the first is the
// primary.
func (tx *Txn) sortedWrites() []*mutation {
	ms := make([]*mutation, 0, len(tx.writes))
	for _, m := range tx.writes {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *mutation) int { return compareKeys(a.key, b.key) })
	return ms
}

func compareKeys(a, b protocol.Key) int {
	return cmp.Or(
		cmp.Compare(a.Table, b.Table),
		compareBytes(a.Row, b.Row),
		cmp.Compare(a.Column.Family, b.Column.Family),
		cmp.Compare(a.Column.Qualifier, b.Column.Qualifier),
	)
}

func compareBytes(a, b []byte) int { return bytes.Compare(a, b) }

func (tx *Txn) lockFor(m *mutation, primary protocol.Key, ttlMs int64) protocol.Lock {
	l := protocol.Lock{
		StartTs: tx.startTs,
		Primary: primary,
		Op:      m.op,
		WallMs:  oracle.PhysicalMillis(tx.startTs),
		TTLMs:   ttlMs,
		Holder:  tx.db.opts.WorkerID,
	}
	if m.op == protocol.OpPut && len(m.value) <= tx.db.opts.ShortValueMax {
		l.Inline, l.Value = true, m.value
	}
	return l
}

// ttlMs counts the lock's lifetime from the start timestamp's physical time,
// on the oracle's clock: the time this transaction has run so far (measured
// locally as a duration, so clock skew does not matter) plus LockTTL.
func (tx *Txn) ttlMs() int64 {
	return (time.Since(tx.begun) + tx.db.opts.LockTTL).Milliseconds()
}

// rowGroups splits ms[from:] (sorted by key) into runs of cells of the
// same row: the indexes of each run.
func rowGroups(ms []*mutation, from int) [][]int {
	var groups [][]int
	for i := from; i < len(ms); i++ {
		if n := len(groups); n > 0 {
			last := ms[groups[n-1][0]].key
			if last.Table == ms[i].key.Table && bytes.Equal(last.Row, ms[i].key.Row) {
				groups[n-1] = append(groups[n-1], i)
				continue
			}
		}
		groups = append(groups, []int{i})
	}
	return groups
}

// prewriteRows locks the cells of each row group (rows[i] indexes ms, all
// in one row) in one row transaction per row that also carries their
// notifications (extra[i] goes with ms[i]). The rows go to the store
// together (see applyRows); a row whose prewrite met a lock is settled on
// its own (see settlePrewrite). The fault hook for step runs after each
// row's prewrite.
func (tx *Txn) prewriteRows(ctx context.Context, ms []*mutation, locks []*protocol.Lock, rows [][]int, extra [][]store.Mutation, step CommitStep) error {
	txns := make([]*store.RowTxn, len(rows))
	for i, idx := range rows {
		txns[i] = tx.prewriteTxn(ms, locks, idx, extra)
	}
	_, err := tx.db.applyRows(ctx, "prewrite", txns, func(i int, res store.RowResult) error {
		if err := tx.settlePrewrite(ctx, txns[i], res); err != nil {
			return err
		}
		return tx.fault(step)
	})
	return err
}

// prewriteTxn is the row transaction that locks the cells ms[idx], all in
// one row, with their notifications.
func (tx *Txn) prewriteTxn(ms []*mutation, locks []*protocol.Lock, idx []int, extra [][]store.Mutation) *store.RowTxn {
	cells := make([]protocol.PrewriteCell, len(idx))
	var notes []store.Mutation
	for j, i := range idx {
		cells[j] = protocol.PrewriteCell{Key: ms[i].key, Lock: locks[i], Value: ms[i].value}
		notes = append(notes, tx.notifyFor(ms[i], locks[i].Primary)...)
		if extra != nil {
			notes = append(notes, extra[i]...)
		}
	}
	return protocol.PrewriteRow(cells, notes...)
}

// prewrite runs the prewrite row transaction txn and settles its result.
func (tx *Txn) prewrite(ctx context.Context, txn *store.RowTxn) error {
	res, err := tx.db.st.Apply(ctx, txn)
	if err != nil {
		return fmt.Errorf("framework: prewrite %s/%q: %w", txn.Table, txn.Row, err)
	}
	return tx.settlePrewrite(ctx, txn, res)
}

// settlePrewrite finishes a prewrite whose first attempt answered res. A
// lock in the way that belongs to an abandoned transaction is resolved
// and the prewrite retried; a live one is a conflict (waiting could
// deadlock two committers).
func (tx *Txn) settlePrewrite(ctx context.Context, txn *store.RowTxn, res store.RowResult) error {
	var waits int
	for {
		if res.Applied {
			return nil
		}
		ours, err := tx.clearPrewrite(ctx, "prewrite", txn, res, &waits)
		if ours || err != nil {
			return err
		}
		if res, err = tx.db.st.Apply(ctx, txn); err != nil {
			return fmt.Errorf("framework: prewrite %s/%q: %w", txn.Table, txn.Row, err)
		}
	}
}

// clearPrewrite examines the result of a row transaction with a
// prewrite's checks (PrewriteRow, OnePhaseRow) that did not apply. ours
// reports our own lock found: an earlier attempt of this same prewrite
// (all of its cells at once) succeeded. Otherwise a nil error means that
// the lock in the way belonged to an abandoned transaction and was
// resolved, so the row transaction may be tried again; a live lock, a
// newer write or our own rollback is a ConflictError (waiting for a live
// lock could deadlock two committers). step names the step in errors.
func (tx *Txn) clearPrewrite(ctx context.Context, step string, txn *store.RowTxn, res store.RowResult, waits *int) (ours bool, err error) {
	c, cellRes := protocol.FailedCell(res)
	k := protocol.Key{Table: txn.Table, Row: txn.Row, Column: txn.Checks[c*protocol.PrewriteChecks].Column}
	outcome, otherTs, other, err := protocol.ClassifyPrewrite(cellRes, tx.startTs)
	if err != nil {
		return false, fmt.Errorf("framework: %s %s: %w", step, k, err)
	}
	conflict := func(kind error, holder string) error {
		return &ConflictError{Kind: kind, Table: k.Table, Row: k.Row, Column: k.Column, StartTs: tx.startTs, OtherTs: otherTs, Holder: holder}
	}
	switch outcome {
	case protocol.PrewriteOK:
		return true, nil
	case protocol.PrewriteRolledBack:
		return false, conflict(ErrAborted, "")
	case protocol.PrewriteWriteConflict:
		return false, conflict(ErrWriteConflict, "")
	}
	// Locked: resolve it if its owner is gone, else give up.
	abandoned, err := tx.lockResolvable(ctx, otherTs, other)
	if err != nil {
		return false, fmt.Errorf("framework: %s %s: %w", step, k, err)
	}
	if !abandoned {
		return false, conflict(ErrLockConflict, other.Holder)
	}
	if err := tx.db.resolve(ctx, k, otherTs, other, false, waits); err != nil {
		return false, fmt.Errorf("framework: %s %s: %w", step, k, err)
	}
	return false, nil
}

func (tx *Txn) lockResolvable(ctx context.Context, lockTs uint64, l *protocol.Lock) (bool, error) {
	st, err := tx.db.txnStatus(ctx, l.Primary, lockTs)
	if err != nil {
		return false, err
	}
	switch st.State {
	case protocol.StateCommitted, protocol.StateRolledBack:
		return true, nil
	case protocol.StateLocked:
		return tx.db.abandoned(ctx, st.Lock)
	}
	return tx.db.abandoned(ctx, l)
}
