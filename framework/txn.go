package framework

import (
	"context"
	"errors"
	"iter"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/store"
)

// Column names a column as family:qualifier.
type Column = store.Column

// Txn is a snapshot-isolation transaction: it reads the store as of its
// start, plus its own writes, which it buffers until it commits. A Txn is
// not safe for concurrent use.
//
// Snapshot isolation prevents lost updates (two transactions writing the
// same cell cannot both commit) but allows write skew: two transactions
// that each read what the other writes, and write disjoint cells, may both
// commit.
type Txn engine.Tx

func (tx *Txn) engine() engine.Txn { return (*engine.Tx)(tx).Txn() }

// Get returns the value of the cell in the transaction's snapshot, or an
// error matching ErrNotFound. A lock left by a transaction that started
// before this one is resolved first: rolled forward if that transaction
// committed, rolled back if its owner is gone, waited for otherwise.
func (tx *Txn) Get(ctx context.Context, table string, row []byte, col Column) ([]byte, error) {
	v, err := tx.engine().Get(ctx, table, row, col)
	return v, err
}

// Lookup is Get for cells that may well be absent: found is false, and err
// nil, when the cell has no value.
func (tx *Txn) Lookup(ctx context.Context, table string, row []byte, col Column) (value []byte, found bool, err error) {
	v, err := tx.engine().Get(ctx, table, row, col)
	switch {
	case err == nil:
		return v, true, nil
	case errors.Is(err, ErrNotFound):
		return nil, false, nil
	}
	return nil, false, err
}

// GetRows reads cols of each of rows of table, in one round trip to the
// store whatever the number of rows (two if some values are long): the
// read to use when an observer looks at many rows, such as the targets of
// a page's links. Locks are resolved as Get resolves them. The result maps
// each row (as a string) that has a value in at least one of cols to its
// values; absent cells are absent from the maps.
func (tx *Txn) GetRows(ctx context.Context, table string, rows [][]byte, cols []Column) (map[string]map[Column][]byte, error) {
	m, err := tx.engine().GetRows(ctx, table, rows, cols)
	return m, err
}

// Set buffers a write of value to the cell.
func (tx *Txn) Set(table string, row []byte, col Column, value []byte) error {
	return tx.engine().Set(table, row, col, value)
}

// Delete buffers the deletion of the cell.
func (tx *Txn) Delete(table string, row []byte, col Column) error {
	return tx.engine().Delete(table, row, col)
}

// NotifyWeak asks the weak observer of (table, col) to look at row once
// this transaction commits; it is written before the commit point, so it
// cannot be lost once the transaction committed. Repeated requests for one
// cell are one.
func (tx *Txn) NotifyWeak(table string, row []byte, col Column) error {
	return tx.engine().NotifyWeak(table, row, col)
}

// StartTs returns the transaction's snapshot timestamp. In a transaction
// whose snapshot its first read is to choose (see DB.View), calling it
// before any read draws the timestamp from the oracle instead; if the
// oracle cannot be reached it returns 0, and the next read chooses.
func (tx *Txn) StartTs() uint64 { return tx.engine().StartTs() }

// ScanOptions select the cells a scan returns.
type ScanOptions struct {
	Table string
	// Start (inclusive) and End (exclusive) bound the rows; nil means
	// unbounded. Ignored when Prefix is set.
	Start, End []byte
	// Prefix, if set, selects the rows that start with it.
	Prefix []byte
	// Families and Columns restrict the columns; both empty means all.
	Families []string
	Columns  []Column
	// After, if set, resumes the scan after this cell: the cells of rows
	// before After.Row, and those of After.Row up to After.Column
	// included, are skipped without being read, so that a scan resuming
	// where an earlier one stopped does not step over them again.
	After *Position
}

// Position is a cell of a table: a row and a column.
type Position = store.Position

// Entry is one cell returned by a scan.
type Entry struct {
	Row    []byte
	Column Column
	Value  []byte
}

// Scan returns the cells of a table in the transaction's snapshot, in row
// then column order, merged with the transaction's own writes (a buffered
// delete hides the stored value). Locks met on the way are resolved as Get
// resolves them. The sequence stops at the first error.
func (tx *Txn) Scan(ctx context.Context, opts ScanOptions) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		// The front's ScanOptions and Entry are the seam's, named here.
		for e, err := range tx.engine().Scan(ctx, engine.ScanOptions(opts)) {
			if !yield(Entry(e), err) {
				return
			}
		}
	}
}
