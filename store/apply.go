package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/trickle-dev/trickle/store/internal/keys"
)

// Apply executes txn atomically: under the row's latch it evaluates the
// checks in order against the current state and, if all hold, commits every
// mutation in one pebble batch (data and notify cells of the row commit
// together even though they live in different groups). The batch is synced
// unless txn.NoSync is set or the store runs with DurabilityNone.
//
// A failed check is not an error: the result has Applied false, the index of
// the first failed check, and for a MustBeAbsent check the newest cell that
// matched it. Mutations of the same (column, ts) in one txn: the last wins.
// Waiting for the row latch does not observe ctx; the wait is bounded by the
// holder's commit (one fsync at most).
func (db *DB) Apply(ctx context.Context, txn *RowTxn) (RowResult, error) {
	res := RowResult{FailedCheck: -1}
	if err := validateTxn(txn); err != nil {
		return res, err
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if err := db.acquire(); err != nil {
		return res, err
	}
	defer db.release()

	latch := db.latches.lock(txn.Table, txn.Row)
	defer latch.Unlock()
	if err := ctx.Err(); err != nil { // we may have waited for the latch
		return res, err
	}
	failed, conflict, err := db.evalChecks(ctx, txn)
	if err != nil {
		return res, err
	}
	if h := db.hooks.afterChecks; h != nil {
		h(txn)
	}
	if failed >= 0 {
		res.FailedCheck, res.Conflict = failed, conflict
		return res, nil
	}
	if len(txn.Mutations) > 0 {
		if err := db.commit(txn); err != nil {
			return res, err
		}
	}
	res.Applied = true
	return res, nil
}

// validateTxn rejects malformed row transactions before any latch is taken.
func validateTxn(txn *RowTxn) error {
	const op = "Apply"
	if txn == nil {
		return invalid(op, "txn", "nil")
	}
	if err := validateTableRow(op, "Table", txn.Table, "Row", txn.Row); err != nil {
		return err
	}
	for i, c := range txn.Checks {
		if err := validateColumn(op, fmt.Sprintf("Checks[%d].Column", i), c.Column); err != nil {
			return err
		}
		if c.MinTs > c.MaxTs {
			return invalid(op, fmt.Sprintf("Checks[%d]", i), "MinTs %d > MaxTs %d", c.MinTs, c.MaxTs)
		}
		if c.Expect != MustBeAbsent && c.Expect != MustExist {
			return invalid(op, fmt.Sprintf("Checks[%d].Expect", i), "unknown presence %d", c.Expect)
		}
	}
	for i, m := range txn.Mutations {
		if err := validateColumn(op, fmt.Sprintf("Mutations[%d].Column", i), m.Column); err != nil {
			return err
		}
	}
	return nil
}

// evalChecks evaluates txn's checks in order with one iterator re-bounded per
// check to exactly the versions the check selects. It returns the index of
// the first failed check (or -1) and, for a failed MustBeAbsent check, the
// newest matching cell.
func (db *DB) evalChecks(ctx context.Context, txn *RowTxn) (int, *Cell, error) {
	if len(txn.Checks) == 0 {
		return -1, nil, nil
	}
	var c *cursor
	var lower, upper []byte
	for i, chk := range txn.Checks {
		col := chk.Column
		g := db.layout.groupOf(col.Family)
		lower = keys.AppendColumnPrefix(lower[:0], g, txn.Table, txn.Row, col.Family, col.Qualifier)
		upper = append(upper[:0], lower...)
		lower = keys.AppendTs(lower, chk.MaxTs)
		// The last version selected is ts == MinTs; the smallest key above
		// it is that key followed by a zero byte.
		upper = append(keys.AppendTs(upper, chk.MinTs), 0)
		if c == nil {
			var err error
			if c, err = db.newIter(ctx, lower, upper); err != nil {
				return 0, nil, err
			}
			defer c.close()
		} else {
			c.setBounds(lower, upper)
		}
		key, value, found, err := firstMatch(c, lower, chk.ValuePrefix)
		if err != nil {
			return 0, nil, err
		}
		if found != (chk.Expect == MustExist) {
			if chk.Expect == MustBeAbsent {
				cell := makeCell(txn.Row, col, keys.DecodeTs(key), value)
				return i, &cell, nil
			}
			return i, nil, nil
		}
	}
	return -1, nil, nil
}

// firstMatch finds the first (newest) entry in the cursor's bounds whose
// value starts with prefix (any value if prefix is nil). The returned key and
// value point into pebble's buffers.
func firstMatch(c *cursor, lower, prefix []byte) (key, value []byte, found bool, err error) {
	for ok := c.seekGE(lower); ok; ok = c.next() {
		v, err := c.value()
		if err != nil {
			return nil, nil, false, err
		}
		if bytes.HasPrefix(v, prefix) {
			return c.key(), v, true, nil
		}
	}
	return nil, nil, false, c.err()
}

// commit writes txn's mutations as one batch.
func (db *DB) commit(txn *RowTxn) error {
	b := db.pdb.NewBatch()
	defer b.Close()
	var k []byte
	for _, m := range txn.Mutations {
		g := db.layout.groupOf(m.Column.Family)
		k = keys.AppendEncode(k[:0], keys.Key{
			Group: g, Table: txn.Table, Row: txn.Row,
			Family: m.Column.Family, Qualifier: m.Column.Qualifier, Ts: m.Ts,
		})
		if m.IfValuePrefix != nil {
			ok, err := db.currentValueHasPrefix(k, m.IfValuePrefix)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		var err error
		if m.Delete {
			err = b.Delete(k, nil)
		} else {
			err = b.Set(k, m.Value, nil)
		}
		if err != nil {
			return fmt.Errorf("store: building batch: %w", err)
		}
	}
	if b.Empty() {
		return nil
	}
	wo := pebble.Sync
	if txn.NoSync || !db.syncOK {
		wo = pebble.NoSync
	}
	if err := b.Commit(wo); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// currentValueHasPrefix reports whether the exact version key exists with a
// value starting with prefix. Called under the row latch, so the answer holds
// until the batch commits.
func (db *DB) currentValueHasPrefix(key, prefix []byte) (bool, error) {
	v, closer, err := db.pdb.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: reading %x for a conditional mutation: %w", key, err)
	}
	defer closer.Close()
	return bytes.HasPrefix(v, prefix), nil
}
