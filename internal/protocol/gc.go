package protocol

import (
	"github.com/trickle-dev/trickle/store"
)

// GCPlan is what garbage collection must do to one column.
type GCPlan struct {
	// Locks below the safe point, as start timestamps with their records.
	// They must be resolved (their transactions can no longer be running)
	// before anything is deleted, and the column planned again.
	Locks     []uint64
	LockRecs  []*Lock
	Deletions []store.Mutation
	// RemovesDeletion reports that the newest write record at or below
	// the safe point is a delete and the plan removes it, taking the
	// column's whole history at or below the safe point with it. Its
	// observer, if a notification of the delete is still pending, would
	// then find no write to tell the deletion by: plan again with
	// keepDeletion until the notification is settled.
	RemovesDeletion bool
}

// PlanGC plans the collection of one column's cells (all kinds, in store
// order: newest first within each kind) at safe point sp. Snapshots at or
// above sp must read exactly what they read before:
//
//   - the newest write record with commit ts <= sp is kept if it is a put
//     (a snapshot at sp reads it) and removed if it is a delete; every older
//     write record is removed with its data record;
//   - a rollback record below sp is removed only when a write record that is
//     kept was committed after it: a prewrite arriving that late fails on
//     that write anyway, so the rollback record is no longer needed to stop
//     it. Otherwise it stays (it is what stops a late prewrite);
//   - data records below sp that no kept write record or lock refers to are
//     removed.
//
// With keepDeletion, a newest write record at or below sp that is a delete
// is kept like a put (the rest of the history below it still goes).
func PlanGC(cells []store.Cell, sp uint64, keepDeletion bool) (GCPlan, error) {
	var (
		plan        GCPlan
		keeperSeen  bool
		newestKept  uint64 // commit ts of the newest kept write record
		keptData    = map[uint64]bool{}
		lockData    = map[uint64]bool{}
		rollbacks   []store.Cell
		dataRecords []store.Cell
	)
	del := func(c store.Cell) {
		plan.Deletions = append(plan.Deletions, store.Mutation{Column: c.Column, Ts: c.Ts, Delete: true})
	}
	for _, c := range cells {
		kind, ts := Untag(c.Ts)
		switch kind {
		case KindLock:
			l, err := DecodeLock(c.Value)
			if err != nil {
				return plan, err
			}
			lockData[l.StartTs] = true
			if l.StartTs < sp {
				plan.Locks = append(plan.Locks, l.StartTs)
				plan.LockRecs = append(plan.LockRecs, l)
			}
		case KindWrite:
			w, err := DecodeWrite(c.Value)
			if err != nil {
				return plan, err
			}
			switch {
			case ts > sp:
				newestKept = max(newestKept, ts)
				keptData[w.StartTs] = true
			case !keeperSeen:
				keeperSeen = true
				if w.Op == OpPut || keepDeletion {
					newestKept = max(newestKept, ts)
					keptData[w.StartTs] = true
				} else {
					del(c)
					plan.RemovesDeletion = true
				}
			default:
				del(c)
			}
		case KindRollback:
			rollbacks = append(rollbacks, c)
		case KindData:
			dataRecords = append(dataRecords, c)
		}
	}
	if len(plan.Locks) > 0 {
		return GCPlan{Locks: plan.Locks, LockRecs: plan.LockRecs}, nil
	}
	for _, c := range rollbacks {
		if _, ts := Untag(c.Ts); ts < sp && newestKept > ts {
			del(c)
		}
	}
	for _, c := range dataRecords {
		if _, ts := Untag(c.Ts); ts < sp && !keptData[ts] && !lockData[ts] {
			del(c)
		}
	}
	return plan, nil
}
