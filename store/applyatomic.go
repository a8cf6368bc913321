package store

import (
	"context"
	"errors"
	"fmt"
)

// HoldingClock gives the timestamp an ApplyAtomic writes at and holds it:
// no later timestamp is given to anyone until release is called (the
// oracle's Server.Hold). The store releases it once its write is visible,
// or known not to have happened.
type HoldingClock interface {
	Hold(ctx context.Context) (ts uint64, release func(), err error)
}

// ApplyAtomic executes txns, on distinct rows, as one atomic operation:
// under all their rows' latches it evaluates every check and, only if all
// hold, holds a timestamp from clock, adds it to the Ts of the first
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
// in this store writes its cells as committed, with no locks, at a
// commit timestamp no snapshot can pass before the write is visible. The
// timestamp is drawn after the checks, under the latches, so it is later
// than every commit the checks saw and than any that could still come
// between them and the write.
//
// Validation is ApplyAll's, plus len(rel) == len(txns) and 0 <= rel[i] <=
// len(txns[i].Mutations); a relative Ts that would overflow fails with an
// *InvalidError after the timestamp is drawn, and nothing is written.
// A clock that cannot hold fails the call, nothing written, with its error
// (the oracle's matches errors.ErrUnsupported); so does a nil clock.
func (db *DB) ApplyAtomic(ctx context.Context, txns []*RowTxn, rel []int, clock HoldingClock) (uint64, []RowResult, error) {
	if err := ValidateApplyAtomic(txns, rel); err != nil {
		return 0, nil, err
	}
	if clock == nil {
		return 0, nil, errNoClock
	}
	return db.applyLatched(ctx, txns, rel, clock)
}

// errNoClock is ApplyAtomic's answer without a clock: this store has no
// oracle of its own to hold a timestamp from.
var errNoClock = fmt.Errorf("store: ApplyAtomic: no clock to hold the commit timestamp from: %w", errors.ErrUnsupported)

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
