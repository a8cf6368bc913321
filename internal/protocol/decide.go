package protocol

import (
	"bytes"
	"fmt"

	"github.com/trickle-dev/trickle/store"
)

// ReadResult is what a snapshot read found in one column.
type ReadResult struct {
	// Lock, if non-nil, is a lock at or below the reader's start timestamp:
	// the read must resolve it before it can answer.
	Lock        *Lock
	LockStartTs uint64
	// Write is the newest write record at or below the start timestamp, or
	// nil if the cell never had a committed value visible to the snapshot.
	Write    *Write
	CommitTs uint64
}

// InterpretRead turns the cells returned for ReadSpans(startTs) of one
// column into a ReadResult. A lock of a transaction that started after
// startTs does not block the read and is ignored, as are cells of other
// kinds.
func InterpretRead(cells []store.Cell, startTs uint64) (ReadResult, error) {
	var r ReadResult
	for _, c := range cells {
		kind, ts := Untag(c.Ts)
		switch kind {
		case KindLock:
			l, err := DecodeLock(c.Value)
			if err != nil {
				return r, fmt.Errorf("lock: %w", err)
			}
			if l.StartTs <= startTs {
				r.Lock, r.LockStartTs = l, l.StartTs
			}
		case KindWrite:
			if r.Write != nil {
				continue
			}
			w, err := DecodeWrite(c.Value)
			if err != nil {
				return r, fmt.Errorf("write at %d: %w", ts, err)
			}
			r.Write, r.CommitTs = w, ts
		}
	}
	return r, nil
}

// TxnState is what became of a transaction on one cell (normally its
// primary).
type TxnState int

// Transaction states.
const (
	// StateMissing: no lock, no commit record, no rollback record. The
	// primary may not have been prewritten yet (secondaries can be prewritten
	// in parallel), so this must never be read as "committed".
	StateMissing TxnState = iota
	StateLocked
	StateCommitted
	StateRolledBack
)

func (s TxnState) String() string {
	return [...]string{"missing", "locked", "committed", "rolled-back"}[s]
}

// Status is the state of a transaction on a cell.
type Status struct {
	State    TxnState
	Lock     *Lock  // StateLocked
	CommitTs uint64 // StateCommitted
}

// InterpretStatus turns the cells returned for StatusSpans(startTs) into a
// Status. A commit record wins over everything (the transaction committed);
// then a rollback record; then the lock.
func InterpretStatus(cells []store.Cell, startTs uint64) (Status, error) {
	prefix := StartTsPrefix(startTs)
	var st Status
	var rolledBack bool
	for _, c := range cells {
		kind, ts := Untag(c.Ts)
		switch kind {
		case KindWrite:
			if !bytes.HasPrefix(c.Value, prefix) {
				continue
			}
			if _, err := DecodeWrite(c.Value); err != nil {
				return st, err
			}
			return Status{State: StateCommitted, CommitTs: ts}, nil
		case KindRollback:
			if ts == startTs {
				rolledBack = true
			}
		case KindLock:
			l, err := DecodeLock(c.Value)
			if err != nil {
				return st, err
			}
			if l.StartTs == startTs {
				st = Status{State: StateLocked, Lock: l}
			}
		}
	}
	if rolledBack {
		return Status{State: StateRolledBack}, nil
	}
	return st, nil
}

// Action is what a transaction that met a lock must do about it.
type Action int

// Actions for a lock found in the way.
const (
	// ActionWait: the owner may still be working; back off and look again.
	ActionWait Action = iota
	// ActionRollForward: the primary committed; commit this cell too at the
	// primary's commit timestamp.
	ActionRollForward
	// ActionRollBack: the primary is rolled back; roll this cell back.
	ActionRollBack
	// ActionRollBackPrimary: the owner is gone; roll back the primary first
	// (the decision point), then this cell.
	ActionRollBackPrimary
)

func (a Action) String() string {
	return [...]string{"wait", "roll-forward", "roll-back", "roll-back-primary"}[a]
}

// Abandoned reports whether a lock's owner can be presumed dead: its TTL has
// run out on the oracle's clock, or the liveness service says its holder is
// gone.
func Abandoned(l *Lock, nowMs int64, holderAlive bool) bool {
	return !holderAlive || l.Expired(nowMs)
}

// Decide chooses what to do about lock l (owned by the transaction that
// started at its start ts) given the state of that transaction's primary.
// primaryAbandoned says whether the primary's lock (for StateLocked) or, when
// the primary is missing, l itself is abandoned. force treats every live
// lock as abandoned (garbage collection below the safe point, where no
// transaction may still be running).
func Decide(primary Status, primaryAbandoned, force bool) Action {
	switch primary.State {
	case StateCommitted:
		return ActionRollForward
	case StateRolledBack:
		return ActionRollBack
	case StateLocked, StateMissing:
		if primaryAbandoned || force {
			return ActionRollBackPrimary
		}
	}
	return ActionWait
}
