package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/trickle-dev/trickle/internal/keys"
)

// Apply executes txn atomically: under the row's latch it refuses txn if
// its Snapshot is below the safe point (see RowTxn.Snapshot), evaluates
// the checks in order against the current state and, if all hold, commits
// every mutation in one pebble batch (cells of the row commit together even when
// they live in different locality groups). The batch is synced
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
	if txn.Snapshot != 0 {
		if err := db.checkSnapshots("Apply", []*RowTxn{txn}); err != nil {
			return res, err
		}
	}
	s := getScratch()
	defer putScratch(s)
	defer s.closeCursor()
	failed, conflict, err := db.evalChecks(ctx, txn, s)
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
		if err := db.commit(txn, s, latch); err != nil {
			return res, err
		}
	}
	res.Applied = true
	return res, nil
}

// validateTxn rejects malformed row transactions before any latch is taken.
// Field names for errors are only formatted once an error is found.
func validateTxn(txn *RowTxn) error {
	const op = "Apply"
	if txn == nil {
		return invalid(op, "txn", "nil")
	}
	if err := validateTableRow(op, "Table", txn.Table, "Row", txn.Row); err != nil {
		return err
	}
	for i := range txn.Checks {
		c := &txn.Checks[i]
		if c.Column.Family == "" {
			return invalid(op, indexed("Checks", i, ".Column"), "empty family")
		}
		if c.MinTs > c.MaxTs {
			return invalid(op, indexed("Checks", i, ""), "MinTs %d > MaxTs %d", c.MinTs, c.MaxTs)
		}
		if c.Expect != MustBeAbsent && c.Expect != MustExist {
			return invalid(op, indexed("Checks", i, ".Expect"), "unknown presence %d", c.Expect)
		}
	}
	for i := range txn.Mutations {
		if txn.Mutations[i].Column.Family == "" {
			return invalid(op, indexed("Mutations", i, ".Column"), "empty family")
		}
		if txn.Mutations[i].SingleDelete && !txn.Mutations[i].Delete {
			return invalid(op, indexed("Mutations", i, ".SingleDelete"), "set without Delete")
		}
	}
	return nil
}

// applyCursor returns the cursor Apply's checks read the row with, opening
// it on first use. It is unbounded (checks may read columns of several
// groups) and only ever positioned with prefix seeks, which confine it to
// one column. It is opened under the row latch, so the row cannot change
// between its snapshot and the commit (nor between Gets of the row).
func (db *DB) applyCursor(ctx context.Context, s *scratch) (*cursor, error) {
	if s.cur.it == nil {
		if err := db.openCursor(ctx, db.pdb, &s.cur, &s.opts, nil, nil, true); err != nil {
			return nil, err
		}
	}
	return &s.cur, nil
}

// closeCursor closes the cursor applyCursor opened, if any.
func (s *scratch) closeCursor() {
	if s.cur.it != nil {
		s.cur.close()
		s.cur.it = nil
	}
}

// evalChecks evaluates txn's checks in order. It returns the index of the
// first failed check (or -1) and, for a failed MustBeAbsent check, the
// newest matching cell.
//
// A check of one exact version (MinTs == MaxTs) is a Get: pebble looks for
// the key level by level, newest first, stops at the first level that has
// it (e.g. the memtable, for a lock just written) and consults only sstables
// whose bloom filter may hold the column (pebble reads the last level's
// data without its filter: exact checks mostly look for a key that exists,
// such as the committer's own lock). Other checks use the Apply cursor
// (opened by the first of them): a prefix seek into the check's column to
// its MaxTs, which consults the filters of every level, the last included,
// since most such checks look for locks and writes of cells that do not
// exist yet.
//
// A check skips its seek when the previous check was on the same column, its
// range lies entirely below the previous check's range (MaxTs < the previous
// MinTs; e.g. the lock and then the write check of a prewrite) and the
// cursor is already at or past the check's first key: every key the cursor
// stepped over since its last seek had a timestamp at or above the previous
// check's MinTs, so none lies in this check's range. Exact checks that chain
// this way with the check before or after them use the cursor rather than
// Get, so that the chain costs a single seek.
func (db *DB) evalChecks(ctx context.Context, txn *RowTxn, s *scratch) (int, *Cell, error) {
	var c *cursor // the Apply cursor, once a check needed it
	for i := range txn.Checks {
		chk := &txn.Checks[i]
		col := chk.Column
		g := db.layout.GroupOf(col.Family)
		s.target = keys.AppendColumnPrefix(s.target[:0], g, txn.Table, txn.Row, col.Family, col.Qualifier)
		s.target = keys.AppendTs(s.target, chk.MaxTs)
		chained := i > 0 && chainsNext(txn.Checks, i-1)
		if chk.MinTs == chk.MaxTs && !chained && !chainsNext(txn.Checks, i) {
			failed, conflict, err := db.checkVersion(txn.Row, chk, s.target)
			if err != nil || failed {
				return i, conflict, err
			}
			continue
		}
		if c == nil {
			var err error
			if c, err = db.applyCursor(ctx, s); err != nil {
				return 0, nil, err
			}
		}
		if !chained || !c.positionedAt(s.target) {
			c.seekPrefixGE(s.target)
		}
		found, err := firstMatch(c, chk.MinTs, chk.ValuePrefix)
		if err != nil {
			return 0, nil, err
		}
		if found != (chk.Expect == MustExist) {
			if chk.Expect == MustBeAbsent {
				v, err := c.value()
				if err != nil {
					return 0, nil, err
				}
				cell := makeCell(txn.Row, col, keys.DecodeTs(c.key()), v)
				return i, &cell, nil
			}
			return i, nil, nil
		}
	}
	return -1, nil, nil
}

// chainsNext reports whether checks[i+1] is on the same column as checks[i]
// and selects only versions older than every version checks[i] selects, so
// that a cursor left by checks[i] may already be positioned for it.
func chainsNext(checks []Check, i int) bool {
	return i+1 < len(checks) && checks[i+1].Column == checks[i].Column && checks[i+1].MaxTs < checks[i].MinTs
}

// checkVersion evaluates a check of the exact version key with Get and
// reports whether it failed, with the conflict cell for a failed
// MustBeAbsent check.
func (db *DB) checkVersion(row []byte, chk *Check, key []byte) (failed bool, conflict *Cell, err error) {
	if db.hooks.seek != nil {
		db.hooks.seek(key)
	}
	v, closer, err := db.pdb.Get(key)
	found := err == nil
	if errors.Is(err, pebble.ErrNotFound) {
		err = nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("store: reading %x for a check: %w", key, err)
	}
	if found {
		defer closer.Close()
		found = bytes.HasPrefix(v, chk.ValuePrefix)
	}
	if found == (chk.Expect == MustExist) {
		return false, nil, nil
	}
	if chk.Expect == MustBeAbsent {
		cell := makeCell(row, chk.Column, chk.MaxTs, v)
		return true, &cell, nil
	}
	return true, nil, nil
}

// firstMatch moves the cursor to the first (newest) version at or after its
// position in its column whose timestamp is at least minTs and whose value
// starts with prefix (any value if prefix is nil), and reports whether there
// is one. The cursor must be in prefix mode. Values are only read if prefix
// is not nil.
func firstMatch(c *cursor, minTs uint64, prefix []byte) (found bool, err error) {
	for ok := c.valid(); ok; ok = c.next() {
		if keys.DecodeTs(c.key()) < minTs {
			break
		}
		if prefix == nil {
			return true, nil
		}
		v, err := c.value()
		if err != nil {
			return false, err
		}
		if bytes.HasPrefix(v, prefix) {
			return true, nil
		}
	}
	return false, c.err()
}

// commit writes txn's mutations as one batch. latch is the row's, held
// by the caller: a synced write is marked in flight on it until it is on
// stable storage (see latches.awaitDurable).
func (db *DB) commit(txn *RowTxn, s *scratch, latch *stripe) error {
	b := db.pdb.NewBatch()
	defer b.Close()
	if err := db.addMutations(b, txn, s, 0, 0); err != nil {
		return err
	}
	if b.Empty() {
		return nil
	}
	wo := pebble.Sync
	if txn.NoSync || !db.syncOK {
		wo = pebble.NoSync
	}
	if h := db.hooks.commit; h != nil {
		h(wo.Sync)
	}
	if wo.Sync {
		defer syncing(latch)()
	}
	if err := b.Commit(wo); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	db.raiseSafePoint(s.safePoint)
	return nil
}

// addMutations adds txn's mutations to b, the first shifted of them at
// their Ts plus shift (see ApplyAtomic). Called under the row's latch.
func (db *DB) addMutations(b *pebble.Batch, txn *RowTxn, s *scratch, shift uint64, shifted int) error {
	for i := range txn.Mutations {
		m := &txn.Mutations[i]
		g := db.layout.GroupOf(m.Column.Family)
		ts := m.Ts
		if i < shifted {
			ts += shift
		}
		s.key = appendMutationKey(s.key[:0], g, txn, m, ts)
		if m.IfValuePrefix != nil {
			ok, err := db.currentValueHasPrefix(s.key, m.IfValuePrefix)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		sp, err := db.safePointWritten("Apply", txn, i)
		if err != nil {
			return err
		}
		s.safePoint = max(s.safePoint, sp)
		switch {
		case m.SingleDelete:
			err = b.SingleDelete(s.key, nil)
		case m.Delete:
			err = b.Delete(s.key, nil)
		default:
			err = b.Set(s.key, m.Value, nil)
		}
		if err != nil {
			return fmt.Errorf("store: building batch: %w", err)
		}
	}
	return nil
}

// currentValueHasPrefix reports whether the exact version key exists with a
// value starting with prefix. Called under the row latch, so the answer holds
// until the batch commits. Like an exact check, it is a Get.
func (db *DB) currentValueHasPrefix(key, prefix []byte) (bool, error) {
	if db.hooks.seek != nil {
		db.hooks.seek(key)
	}
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
