package protocol

import (
	"github.com/trickle-dev/trickle/store"
)

// Each builder below returns the single row transaction that performs one
// protocol step on one cell. Check order matters: the index of the first
// failing check tells the caller what went wrong.

// Prewrite check indexes, in store key order so that the store's iterator
// only ever seeks forward.
const (
	PrewriteCheckLock     = 0 // any lock: lock conflict
	PrewriteCheckWrite    = 1 // a write committed at or after startTs: write conflict
	PrewriteCheckRollback = 2 // a rollback record at startTs: we were rolled back
)

// lockCheck selects the cell's lock; with owner set, only the lock of the
// transaction that started at owner.
func lockCheck(k Key, expect store.Presence, owner []byte) store.Check {
	return store.Check{Column: k.Column, MinTs: LockTs, MaxTs: LockTs, ValuePrefix: owner, Expect: expect}
}

// deleteOwnLock removes the cell's lock if it belongs to the transaction
// whose StartTsPrefix is owner, and leaves anyone else's alone.
func deleteOwnLock(k Key, owner []byte) store.Mutation {
	return store.Mutation{Column: k.Column, Ts: LockTs, Delete: true, IfValuePrefix: owner}
}

// deleteSecondaryLock is deleteOwnLock for a secondary's lock, as a
// single delete (store.Mutation.SingleDelete): every lock is written by
// a prewrite that checked the cell unlocked, and only a primary's lock
// is ever rewritten (Heartbeat), so a secondary's lock version was
// written exactly once since the lock before it was deleted. The lock
// and its delete then vanish together at the store's first flush,
// instead of leaving a tombstone at the top of the column that every
// later check and read of the cell steps over until compaction reaches
// the bottom level. A primary's lock keeps the plain delete.
func deleteSecondaryLock(k Key, owner []byte) store.Mutation {
	m := deleteOwnLock(k, owner)
	m.SingleDelete = true
	return m
}

// Prewrite locks k for the transaction that started at startTs (l.StartTs)
// and stores
// its value (in the lock when l.Inline, else in a data record). It fails if
// the transaction was already rolled back here, if anyone committed a write
// to k at or after startTs, or if any lock is present.
//
// extra mutations (the cell's notify cell) commit in the same row
// transaction.
func Prewrite(k Key, l *Lock, value []byte, extra ...store.Mutation) *store.RowTxn {
	return PrewriteRow([]PrewriteCell{{Key: k, Lock: l, Value: value}}, extra...)
}

// PrewriteCell is one cell of a PrewriteRow.
type PrewriteCell struct {
	Key   Key
	Lock  *Lock
	Value []byte
	// Guarded, in OnePhaseRow, leaves the cell's checks out: another cell
	// of the transaction, written by every writer of this one, is checked
	// instead. PrewriteRow checks every cell: a lock must stay the only
	// one on its cell.
	Guarded bool
}

// prewriteOne and commitOne are row transactions with room for the checks
// and mutations of a one-cell prewrite or commit (a wide transaction's rows
// mostly hold one cell each), so that building one is a single allocation.
type (
	prewriteOne struct {
		t      store.RowTxn
		checks [PrewriteChecks]store.Check
		muts   [3]store.Mutation
	}
	commitOne struct {
		t      store.RowTxn
		checks [1]store.Check
		muts   [2]store.Mutation
	}
)

// newRowTxn returns an empty row transaction with room for checks checks
// and muts mutations.
func newRowTxn(checks, muts int) *store.RowTxn {
	switch {
	case checks <= 1 && muts <= 2:
		a := new(commitOne)
		a.t.Checks, a.t.Mutations = a.checks[:0:checks], a.muts[:0:muts]
		return &a.t
	case checks <= PrewriteChecks && muts <= 3:
		a := new(prewriteOne)
		a.t.Checks, a.t.Mutations = a.checks[:0:checks], a.muts[:0:muts]
		return &a.t
	}
	return &store.RowTxn{Checks: make([]store.Check, 0, checks), Mutations: make([]store.Mutation, 0, muts)}
}

// PrewriteChecks is the number of checks a prewrite makes per cell: check i
// of a PrewriteRow concerns cell i/PrewriteChecks, and i%PrewriteChecks is
// one of the PrewriteCheck* indexes.
const PrewriteChecks = 3

// appendPrewriteChecks appends the PrewriteChecks checks of a prewrite of
// k by the transaction that started at startTs, in the order of the
// PrewriteCheck* indexes.
func appendPrewriteChecks(checks []store.Check, k Key, startTs uint64) []store.Check {
	return append(checks,
		lockCheck(k, store.MustBeAbsent, nil), // PrewriteCheckLock
		store.Check{Column: k.Column, MinTs: Tag(KindWrite, startTs), MaxTs: Tag(KindWrite, MaxTs), Expect: store.MustBeAbsent},         // PrewriteCheckWrite
		store.Check{Column: k.Column, MinTs: Tag(KindRollback, startTs), MaxTs: Tag(KindRollback, startTs), Expect: store.MustBeAbsent}, // PrewriteCheckRollback
	)
}

// PrewriteRow prewrites several cells of one row (given in column order) in
// one row transaction: each cell is checked and locked exactly as Prewrite
// does, and either all are locked or none is. A row's cells belong to one
// transaction's commit together anyway; one row transaction instead of one
// per cell is the store's atomic row operation put to use.
func PrewriteRow(cells []PrewriteCell, extra ...store.Mutation) *store.RowTxn {
	k0 := cells[0].Key
	t := newRowTxn(PrewriteChecks*len(cells), 2*len(cells)+len(extra))
	t.Table, t.Row = k0.Table, k0.Row
	// Prewrites need not be durable on return: the commit point is a
	// synced write to the same ordered log, and a prewrite lost in a crash
	// before it only means the commit point fails.
	t.NoSync = true
	// Below the safe point the store refuses it: the write conflict check
	// could miss a write a collection removed.
	t.Snapshot = cells[0].Lock.StartTs
	for _, c := range cells {
		k, startTs := c.Key, c.Lock.StartTs
		t.Checks = appendPrewriteChecks(t.Checks, k, startTs)
		t.Mutations = append(t.Mutations, store.Mutation{Column: k.Column, Ts: LockTs, Value: EncodeLock(c.Lock)})
		if c.Lock.Op == OpPut && !c.Lock.Inline {
			t.Mutations = append(t.Mutations, store.Mutation{Column: k.Column, Ts: Tag(KindData, startTs), Value: c.Value})
		}
	}
	t.Mutations = append(t.Mutations, extra...)
	return t
}

// OnePhaseRow writes cells of one row (in column order) as committed, with
// no lock, for a transaction that commits every row in one atomic store
// write (store.DB.ApplyAtomic) instead of prewriting and committing. Its
// checks are PrewriteRow's, in the same order, except that Guarded cells
// have none; so FailedCell (counting checked cells) and ClassifyPrewrite
// read a failed result the same way. Its first rel
// mutations are the cells' write records at Tag(KindWrite, 0), relative to
// the commit timestamp the store draws: adding it gives the records
// CommitSecondaryRow would write at that timestamp. The data records of
// values too long to inline (at the start timestamp) and extra follow.
// Applied at commit timestamp c, it leaves the row as PrewriteRow followed
// by CommitSecondaryRow at c would, without the lock and its delete.
func OnePhaseRow(cells []PrewriteCell, extra ...store.Mutation) (t *store.RowTxn, rel int) {
	k0 := cells[0].Key
	t = newRowTxn(PrewriteChecks*len(cells), 2*len(cells)+len(extra))
	t.Table, t.Row, t.Snapshot = k0.Table, k0.Row, cells[0].Lock.StartTs
	for _, c := range cells {
		k, l := c.Key, c.Lock
		if !c.Guarded {
			t.Checks = appendPrewriteChecks(t.Checks, k, l.StartTs)
		}
		w := Write{StartTs: l.StartTs, Op: l.Op, Inline: l.Inline, Value: l.Value}
		t.Mutations = append(t.Mutations, store.Mutation{Column: k.Column, Ts: Tag(KindWrite, 0), Value: EncodeWrite(&w)})
	}
	for _, c := range cells {
		if l := c.Lock; l.Op == OpPut && !l.Inline {
			t.Mutations = append(t.Mutations, store.Mutation{Column: c.Key.Column, Ts: Tag(KindData, l.StartTs), Value: c.Value})
		}
	}
	t.Mutations = append(t.Mutations, extra...)
	return t, len(cells)
}

// FailedCell returns which cell of a PrewriteRow a failed result is about,
// and the result as ClassifyPrewrite expects it for that cell alone.
func FailedCell(res store.RowResult) (int, store.RowResult) {
	if res.Applied {
		return 0, res
	}
	cell := res.FailedCheck / PrewriteChecks
	res.FailedCheck %= PrewriteChecks
	return cell, res
}

// PrewriteOutcome classifies the result of a Prewrite row transaction.
type PrewriteOutcome int

// Prewrite outcomes.
const (
	PrewriteOK PrewriteOutcome = iota
	// PrewriteRolledBack: a rollback record exists at startTs; the
	// transaction must abort.
	PrewriteRolledBack
	// PrewriteWriteConflict: someone committed k at or after startTs.
	PrewriteWriteConflict
	// PrewriteLocked: another transaction holds a lock on k.
	PrewriteLocked
)

// ClassifyPrewrite interprets a Prewrite result. For PrewriteLocked it also
// returns the conflicting lock's start timestamp and record; for
// PrewriteWriteConflict the conflicting commit timestamp. A lock found at our
// own startTs means an earlier attempt of this same prewrite already
// succeeded, which is success (prewrite is idempotent).
func ClassifyPrewrite(res store.RowResult, startTs uint64) (PrewriteOutcome, uint64, *Lock, error) {
	if res.Applied {
		return PrewriteOK, 0, nil, nil
	}
	var ts uint64
	if res.Conflict != nil {
		_, ts = Untag(res.Conflict.Ts)
	}
	switch res.FailedCheck {
	case PrewriteCheckRollback:
		return PrewriteRolledBack, startTs, nil, nil
	case PrewriteCheckWrite:
		return PrewriteWriteConflict, ts, nil, nil
	case PrewriteCheckLock:
		l, err := DecodeLock(res.Conflict.Value)
		if err != nil {
			return 0, 0, nil, err
		}
		if l.StartTs == startTs {
			return PrewriteOK, 0, nil, nil
		}
		return PrewriteLocked, l.StartTs, l, nil
	}
	return 0, 0, nil, ErrCorrupt
}

// CommitPrimary is the commit point: it turns the primary's lock into a write
// record at commitTs, but only if the lock is still there (nobody rolled us
// back) and the transaction did not start below the safe point (a
// collection that passed it rolls its locks back, but may not have reached
// them yet). It is synced: once it returns, the transaction is committed.
func CommitPrimary(k Key, startTs, commitTs uint64, w *Write) *store.RowTxn {
	return &store.RowTxn{
		Table:    k.Table,
		Row:      k.Row,
		Snapshot: startTs,
		Checks:   []store.Check{lockCheck(k, store.MustExist, StartTsPrefix(startTs))},
		Mutations: []store.Mutation{
			// The check proved the lock is ours; no need to ask again.
			{Column: k.Column, Ts: LockTs, Delete: true},
			{Column: k.Column, Ts: Tag(KindWrite, commitTs), Value: EncodeWrite(w)},
		},
	}
}

// CommitPrimaryNow marks the mutations of CommitPrimary(k, startTs, 0, w)
// whose Ts is relative to the commit timestamp (bit i for mutation i), for
// a store that draws the commit timestamp while it applies the commit
// point: adding it to the write record's Tag(KindWrite, 0) gives
// CommitPrimary(k, startTs, commitTs, w).
const CommitPrimaryNow uint64 = 1 << 1

// CommitSecondary writes a secondary's write record and removes its lock.
// It runs only once the primary is committed (by the committer or by a
// reader rolling forward), so the only check is a guard against ever
// committing a cell that was rolled back, which would split the transaction.
// Repeating it is harmless (same write record, same key).
func CommitSecondary(k Key, startTs, commitTs uint64, w *Write) *store.RowTxn {
	return CommitSecondaryRow([]CommitCell{{Key: k, Write: w}}, startTs, commitTs)
}

// CommitCell is one cell of a CommitSecondaryRow.
type CommitCell struct {
	Key   Key
	Write *Write
}

// CommitSecondaryRow commits several secondaries of one row (in column
// order) in one row transaction, each as CommitSecondary does; the check of
// cell i is check i.
func CommitSecondaryRow(cells []CommitCell, startTs, commitTs uint64) *store.RowTxn {
	return commitSecondaryRow(cells, startTs, commitTs, false)
}

// CommitSecondaryRowLocked commits several secondaries of one row like
// CommitSecondaryRow, for the committer that prewrote them, on the cheaper
// proof: check i requires cell i's lock to be the transaction's own (a
// lock starting with StartTsPrefix(startTs)). A rollback removes the lock
// in the same row transaction that writes its rollback record, so while
// the lock is there no rollback can have happened; the lock was written
// moments ago and is found at the top of the store's newest level, where
// proving the rollback record absent means looking through every level.
// If a check fails (someone rolled the cell forward already, or the lock
// is gone for another reason) nothing is written and the caller falls back
// to CommitSecondaryRow, which decides on the rollback record itself.
func CommitSecondaryRowLocked(cells []CommitCell, startTs, commitTs uint64) *store.RowTxn {
	return commitSecondaryRow(cells, startTs, commitTs, true)
}

// commitSecondaryRow builds both: with ownLock the check of cell i is its
// lock being the transaction's own and the lock is deleted outright (the
// check proved it ours); without, the check is the absence of a rollback
// record and only the transaction's own lock is deleted.
func commitSecondaryRow(cells []CommitCell, startTs, commitTs uint64, ownLock bool) *store.RowTxn {
	k0 := cells[0].Key
	t := newRowTxn(len(cells), 2*len(cells))
	t.Table, t.Row, t.NoSync = k0.Table, k0.Row, true
	owner := StartTsPrefix(startTs) // shared by the row's checks and deletes
	for _, c := range cells {
		k := c.Key
		unlock := deleteSecondaryLock(k, owner)
		if ownLock {
			t.Checks = append(t.Checks, lockCheck(k, store.MustExist, owner))
			unlock.IfValuePrefix = nil
		} else {
			t.Checks = append(t.Checks, store.Check{Column: k.Column, MinTs: Tag(KindRollback, startTs), MaxTs: Tag(KindRollback, startTs), Expect: store.MustBeAbsent})
		}
		t.Mutations = append(t.Mutations, unlock,
			store.Mutation{Column: k.Column, Ts: Tag(KindWrite, commitTs), Value: EncodeWrite(c.Write)})
	}
	return t
}

// Rollback rolls back the transaction that started at startTs on k: it
// removes its lock and data and leaves a rollback record, even when no lock
// is found, so that a prewrite arriving late fails. It refuses (check 0
// fails, Conflict = the commit record) if that transaction already committed
// k, so a committed write is never erased. It is synced, because readers act
// on it. Repeating it is harmless.
//
// Only a primary's rollback record decides anything, so only it is synced; a
// secondary's rollback lost in a crash is redone by the next reader, which
// finds the primary rolled back.
func Rollback(k Key, startTs uint64, primary bool) *store.RowTxn {
	owner := StartTsPrefix(startTs)
	unlock := deleteOwnLock(k, owner)
	if !primary {
		unlock = deleteSecondaryLock(k, owner)
	}
	return &store.RowTxn{
		NoSync: !primary,
		Table:  k.Table,
		Row:    k.Row,
		Checks: []store.Check{{
			Column: k.Column, MinTs: Tag(KindWrite, startTs+1), MaxTs: Tag(KindWrite, MaxTs),
			ValuePrefix: StartTsPrefix(startTs), Expect: store.MustBeAbsent,
		}},
		Mutations: []store.Mutation{
			unlock,
			{Column: k.Column, Ts: Tag(KindRollback, startTs), Value: []byte{}},
			{Column: k.Column, Ts: Tag(KindData, startTs), Delete: true},
		},
	}
}

// Heartbeat rewrites the primary's lock with a longer TTL, if it is still
// there, so that a long commit is not mistaken for an abandoned one.
func Heartbeat(k Key, l *Lock) *store.RowTxn {
	return &store.RowTxn{
		Table:     k.Table,
		Row:       k.Row,
		Checks:    []store.Check{lockCheck(k, store.MustExist, StartTsPrefix(l.StartTs))},
		Mutations: []store.Mutation{{Column: k.Column, Ts: LockTs, Value: EncodeLock(l)}},
		NoSync:    true,
	}
}

// lockSpan selects a cell's lock.
var lockSpan = store.Span{MaxTs: LockTs, MinTs: LockTs, Limit: 1}

// LockSpans select a cell's lock alone: what a collection looks for, and
// what a resolver reads again before it judges a transaction by its lock.
func LockSpans() []store.Span { return []store.Span{lockSpan} }

// ReadSpans are the spans a snapshot read at startTs needs from a column:
// the lock (InterpretRead ignores it if it started after startTs) and the
// newest write record at or below startTs.
func ReadSpans(startTs uint64) []store.Span {
	return []store.Span{
		lockSpan,
		{MaxTs: Tag(KindWrite, startTs), MinTs: Tag(KindWrite, 0), Limit: 1},
	}
}

// ReadSpansNow marks the spans of ReadSpans(0) whose MaxTs is relative to
// the start timestamp (bit j for span j), for a store that draws the
// timestamp while it serves the read: Tag is additive below MaxTs, so
// adding the timestamp to ReadSpans(0)'s write bound gives ReadSpans(ts)'s.
const ReadSpansNow uint64 = 1 << 1

// StatusSpans are the spans that tell what became of the transaction that
// started at startTs on a cell: its lock, write records after startTs (one of
// them may be its commit record) and its rollback record.
func StatusSpans(startTs uint64) []store.Span {
	return []store.Span{
		lockSpan,
		{MaxTs: Tag(KindWrite, MaxTs), MinTs: Tag(KindWrite, startTs+1)},
		{MaxTs: Tag(KindRollback, startTs), MinTs: Tag(KindRollback, startTs), Limit: 1},
	}
}

// DataSpan selects the data record written by the transaction at startTs.
func DataSpan(startTs uint64) []store.Span {
	return []store.Span{{MaxTs: Tag(KindData, startTs), MinTs: Tag(KindData, startTs), Limit: 1}}
}
