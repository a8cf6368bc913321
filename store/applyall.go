package store

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// MaxApplyAll is how many row transactions one ApplyAll may carry.
const MaxApplyAll = 4096

// ApplyAll executes txns as Apply would, in one pebble batch.
//
// It runs under all their rows' latches at once (a Snapshot below the safe
// point refuses the whole call, before anything is written) and writes
// every mutation of the row transactions whose checks held in one batch,
// synced if any of them asks for it. The rows' latches are taken in a
// fixed order, so concurrent ApplyAll calls cannot deadlock.
//
// Every txn is validated before any is run: a bad one fails the whole call
// with an *InvalidError naming it (txns[2].Checks[0].Expect), and nothing
// is written. A nil txn is reported before any other fault, so that a
// client that cannot send a nil one reports the same error as the store.
func (db *DB) ApplyAll(ctx context.Context, txns []*RowTxn) ([]RowResult, error) {
	if err := validateAll("ApplyAll", txns); err != nil {
		return nil, err
	}
	_, results, err := db.applyLatched(ctx, txns, nil, nil)
	return results, err
}

// applyLatched runs txns under all their rows' latches, as ApplyAll does.
// With a clock it runs them as ApplyAtomic does: every txn's checks must
// hold or nothing is written, and the first rel[i] mutations of txns[i]
// are written at their Ts plus a timestamp drawn from clock, their rows
// pending from before the draw until the write is visible.
func (db *DB) applyLatched(ctx context.Context, txns []*RowTxn, rel []int, clock Clock) (uint64, []RowResult, error) {
	if len(txns) == 0 {
		return 0, nil, nil
	}
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	if err := db.acquire(); err != nil {
		return 0, nil, err
	}
	defer db.release()
	held := db.latches.lockAll(func(yield func(string, []byte) bool) {
		for _, txn := range txns {
			if !yield(txn.Table, txn.Row) {
				return
			}
		}
	})
	defer func() {
		for _, m := range held {
			m.Unlock()
		}
	}()
	if err := ctx.Err(); err != nil { // we may have waited for the latches
		return 0, nil, err
	}
	op := "ApplyAll"
	if clock != nil {
		op = "ApplyAtomic"
	}
	if err := db.checkSnapshots(op, txns); err != nil {
		return 0, nil, err
	}
	s := getScratch()
	defer putScratch(s)
	defer s.closeCursor()
	sync := false
	results := make([]RowResult, len(txns))
	for i := range results {
		results[i].FailedCheck = -1
	}
	for i, txn := range txns {
		failed, conflict, err := db.evalChecks(ctx, txn, s)
		if err != nil {
			return 0, nil, err
		}
		if h := db.hooks.afterChecks; h != nil {
			h(txn)
		}
		if failed >= 0 {
			results[i].FailedCheck, results[i].Conflict = failed, conflict
			if clock != nil {
				return 0, results, nil // all or none: none
			}
			continue
		}
		sync = sync || !txn.NoSync
	}
	var ts uint64
	if clock != nil {
		// Readers wait for these rows from before the timestamp is
		// drawn until the batch is visible, or known not to be.
		defer db.pending.add(txns)()
		var err error
		if ts, err = clock.Timestamp(ctx); err != nil {
			return 0, nil, fmt.Errorf("store: ApplyAtomic: drawing the commit timestamp: %w: %w", ErrNoTimestamp, err)
		}
		if err := checkShift(txns, rel, ts); err != nil {
			return 0, nil, err
		}
	}
	b := db.pdb.NewBatch()
	defer b.Close()
	for i, txn := range txns {
		if results[i].FailedCheck >= 0 {
			continue
		}
		var shifted int
		if rel != nil {
			shifted = rel[i]
		}
		if err := db.addMutations(b, txn, s, ts, shifted); err != nil {
			if ie, ok := err.(*InvalidError); ok {
				err = &InvalidError{Op: op, Field: indexed("txns", i, "."+ie.Field), Reason: ie.Reason}
			}
			return 0, nil, err
		}
		results[i].Applied = true
	}
	if b.Empty() {
		return ts, results, nil
	}
	wo := pebble.NoSync
	if sync && db.syncOK {
		wo = pebble.Sync
	}
	if h := db.hooks.commit; h != nil {
		h(wo.Sync)
	}
	if wo.Sync {
		// Readers of these rows wait until the batch is on stable
		// storage (see latches.awaitDurable).
		defer syncing(held...)()
	}
	if err := b.Commit(wo); err != nil {
		return 0, nil, &commitError{err}
	}
	db.raiseSafePoint(s.safePoint)
	return ts, results, nil
}

// validateAll validates an ApplyAll call: its size, then nil row
// transactions (reported before any other fault), then each row
// transaction in order and that no two name the same row.
func validateAll(op string, txns []*RowTxn) error {
	if len(txns) > MaxApplyAll {
		return invalid(op, "txns", "%d row transactions, more than MaxApplyAll (%d)", len(txns), MaxApplyAll)
	}
	for i, txn := range txns {
		if txn == nil {
			return invalid(op, indexed("txns", i, ""), "nil")
		}
	}
	// Rows in strictly increasing order (as a transaction's commit sends
	// them) cannot repeat; only others need the map.
	var seen map[rowKey]int
	if !rowsIncrease(txns) {
		seen = make(map[rowKey]int, len(txns))
	}
	for i, txn := range txns {
		if err := validateTxn(txn); err != nil {
			if ie, ok := err.(*InvalidError); ok {
				return &InvalidError{Op: op, Field: indexed("txns", i, "."+ie.Field), Reason: ie.Reason}
			}
			return err
		}
		if seen == nil {
			continue
		}
		k := rowKey{txn.Table, string(txn.Row)}
		if j, dup := seen[k]; dup {
			return invalid(op, indexed("txns", i, ""), "the same row as txns[%d]", j)
		}
		seen[k] = i
	}
	return nil
}

// rowsIncrease reports whether txns' (table, row) pairs strictly increase.
func rowsIncrease(txns []*RowTxn) bool {
	for i := 1; i < len(txns); i++ {
		a, b := txns[i-1], txns[i]
		if a.Table > b.Table || a.Table == b.Table && bytes.Compare(a.Row, b.Row) >= 0 {
			return false
		}
	}
	return true
}

// rowKey names a row of a table. Table names and rows may hold any byte,
// so the two are kept apart rather than joined with a separator.
type rowKey struct{ table, row string }
