package store

import (
	"context"
	"errors"
	"fmt"
)

// Clock gives the commit timestamp of an ApplyAtomic: the oracle that
// every reader of the store draws its snapshots from.
type Clock interface {
	Timestamp(ctx context.Context) (uint64, error)
}

// ApplyAtomic executes txns, on distinct rows, as one atomic operation:
// under all their rows' latches it evaluates every check and, only if all
// hold, draws a timestamp from clock, adds it to the Ts of the first
// rel[i] mutations of txns[i] (the others keep theirs), and writes every
// mutation in one pebble batch, synced unless every txn is NoSync. It
// returns the timestamp with one result per txn.
//
// If a check fails nothing is written and no timestamp is drawn: the
// txn whose check failed has its FailedCheck and Conflict as Apply would
// report them, the txns before it FailedCheck -1, and the txns after it
// were not evaluated (FailedCheck -1 too); every Applied is false.
//
// It is what a one-phase commit needs: a transaction whose rows all live
// in this store writes its cells as committed, with no locks. The
// timestamp is drawn after the checks, under the latches, so it is later
// than every commit the checks saw and than any that could still come
// between them and the write. From before it is drawn until the write is
// visible, the rows are pending: ReadRow, ReadRows and Scan wait for the
// pending rows they read, so that no snapshot later than the timestamp
// reads them without the write. clock must therefore be the oracle the
// store's readers use.
//
// Validation is ApplyAll's, plus len(rel) == len(txns) and 0 <= rel[i] <=
// len(txns[i].Mutations); a relative Ts that would overflow fails with an
// *InvalidError after the timestamp is drawn, and nothing is written. A
// nil clock fails with an error matching errors.ErrUnsupported. Every
// other failure before the batch is committed (a clock that fails, the
// context ending while the call waits for latches) is wrapped with
// ErrNoTimestamp: nothing was written.
func (db *DB) ApplyAtomic(ctx context.Context, txns []*RowTxn, rel []int, clock Clock) (uint64, []RowResult, error) {
	if err := ValidateApplyAtomic(txns, rel); err != nil {
		return 0, nil, err
	}
	if clock == nil {
		return 0, nil, errNoClock
	}
	ts, results, err := db.applyLatched(ctx, txns, rel, clock)
	var ce *commitError
	if err != nil && !errors.As(err, &ce) && !errors.Is(err, ErrNoTimestamp) {
		// Failed before the timestamp was drawn (the context ended
		// while waiting for the latches, the store closed, a read of
		// the checks failed): nothing was written.
		err = fmt.Errorf("store: ApplyAtomic: before drawing the commit timestamp: %w: %w", ErrNoTimestamp, err)
	}
	return ts, results, err
}

// commitError is the error of a pebble batch commit, whose outcome the
// caller cannot know.
type commitError struct{ err error }

func (e *commitError) Error() string { return "store: commit: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// errNoClock is ApplyAtomic's answer without a clock: the store has no
// oracle of its own to draw the commit timestamp from.
var errNoClock = fmt.Errorf("store: ApplyAtomic: no clock to draw the commit timestamp from: %w", errors.ErrUnsupported)

// ValidateApplyAtomic reports what ApplyAtomic would reject txns and rel
// for, or nil.
func ValidateApplyAtomic(txns []*RowTxn, rel []int) error {
	const op = "ApplyAtomic"
	if err := validateAll(op, txns); err != nil {
		return err
	}
	if len(rel) != len(txns) {
		return invalid(op, "rel", "%d counts for %d row transactions", len(rel), len(txns))
	}
	for i, n := range rel {
		if n < 0 || n > len(txns[i].Mutations) {
			return invalid(op, indexed("rel", i, ""), "%d relative mutations of %d", n, len(txns[i].Mutations))
		}
	}
	return nil
}

// checkShift reports the first relative mutation whose Ts plus ts would
// overflow.
func checkShift(txns []*RowTxn, rel []int, ts uint64) error {
	for i, txn := range txns {
		for j := range rel[i] {
			if txn.Mutations[j].Ts > ^uint64(0)-ts {
				return invalid("ApplyAtomic", indexed("txns", i, indexed(".Mutations", j, ".Ts")), "%d plus the timestamp %d overflows", txn.Mutations[j].Ts, ts)
			}
		}
	}
	return nil
}
