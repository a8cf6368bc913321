package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/trickle-dev/trickle/internal/keys"
)

// SafePointCell names the cell that holds a store's garbage-collection
// safe point (see Options.SafePoint): the value of its version 0, an
// 8-byte big-endian timestamp.
type SafePointCell struct {
	Table  string
	Row    []byte
	Column Column
}

// ErrSnapshotTooOld is matched by the error of a row transaction refused
// because its Snapshot is below the store's safe point: nothing of it was
// written. Use errors.As with *SnapshotError for the figures.
var ErrSnapshotTooOld = errors.New("store: snapshot below the safe point")

// SnapshotError reports a row transaction refused because the transaction
// it belongs to started below the store's safe point: versions its reads
// relied on may have been collected, so its checks could pass where they
// must fail.
type SnapshotError struct {
	Op        string // the operation, e.g. "Apply"
	Field     string // the row transaction, e.g. "txns[3].Snapshot"
	Snapshot  uint64
	SafePoint uint64
}

func (e *SnapshotError) Error() string {
	return fmt.Sprintf("store: %s: %s %d is below the safe point %d: versions its transaction may have read were collected", e.Op, e.Field, e.Snapshot, e.SafePoint)
}

// Is makes errors.Is(err, ErrSnapshotTooOld) true for every SnapshotError.
func (e *SnapshotError) Is(target error) bool { return target == ErrSnapshotTooOld }

// safePoint is the store's safe point: the cell that holds it and its
// value, kept in memory so that row transactions check it at the cost of
// an atomic load.
type safePoint struct {
	cell *SafePointCell
	key  []byte // the cell's version 0, encoded
}

// loadSafePoint reads the safe point the store holds (0 if none).
func (db *DB) loadSafePoint() error {
	sp := db.sp.cell
	if sp == nil {
		return nil
	}
	db.sp.key = keys.AppendEncode(nil, keys.Key{Group: db.layout.GroupOf(sp.Column.Family), Table: sp.Table, Row: sp.Row,
		Family: sp.Column.Family, Qualifier: sp.Column.Qualifier, Ts: 0})
	v, closer, err := db.pdb.Get(db.sp.key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: reading the safe point: %w", err)
	}
	defer closer.Close()
	if len(v) == 8 {
		db.safePoint.Store(binary.BigEndian.Uint64(v))
	}
	return nil
}

// SafePoint returns the store's safe point: the highest value written to
// Options.SafePoint's cell (0 without one).
func (db *DB) SafePoint() uint64 { return db.safePoint.Load() }

// checkSnapshots refuses txns if one of them carries a Snapshot below the
// safe point. The caller holds the latches of every row of txns, so a
// collection that raises the safe point after this check removes nothing
// of those rows before their write (its deletions need their latches).
func (db *DB) checkSnapshots(op string, txns []*RowTxn) error {
	sp := db.safePoint.Load()
	if sp == 0 {
		return nil
	}
	for i, txn := range txns {
		if txn.Snapshot != 0 && txn.Snapshot < sp {
			field := "Snapshot"
			if op != "Apply" {
				field = indexed("txns", i, ".Snapshot")
			}
			return &SnapshotError{Op: op, Field: field, Snapshot: txn.Snapshot, SafePoint: sp}
		}
	}
	return nil
}

// safePointWritten returns the safe point m (mutation i of txn, about to
// be written) writes, or 0 if m does not write the safe point's cell. A
// write there must raise it (or keep it): an 8-byte value at version 0 no
// lower than the safe point; anything else (a lower value, a delete, a
// malformed value) is refused with an *InvalidError, since transactions
// refused or let through so far relied on it.
func (db *DB) safePointWritten(op string, txn *RowTxn, i int) (uint64, error) {
	sp, m := db.sp.cell, &txn.Mutations[i]
	if sp == nil || m.Ts != 0 || m.Column != sp.Column || txn.Table != sp.Table || !bytes.Equal(txn.Row, sp.Row) {
		return 0, nil
	}
	field := indexed("Mutations", i, "")
	switch cur := db.safePoint.Load(); {
	case m.Delete:
		return 0, invalid(op, field, "deletes the safe point")
	case len(m.Value) != 8:
		return 0, invalid(op, field, "a safe point of %d bytes, want 8", len(m.Value))
	case binary.BigEndian.Uint64(m.Value) < cur:
		return 0, invalid(op, field, "lowers the safe point from %d to %d", cur, binary.BigEndian.Uint64(m.Value))
	}
	return binary.BigEndian.Uint64(m.Value), nil
}

// raiseSafePoint moves the in-memory safe point up to sp, once the write
// that stores it is committed.
func (db *DB) raiseSafePoint(sp uint64) {
	for cur := db.safePoint.Load(); sp > cur && !db.safePoint.CompareAndSwap(cur, sp); cur = db.safePoint.Load() {
	}
}
