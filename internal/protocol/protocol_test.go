package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

func TestTagOrdersKindsWithinAColumn(t *testing.T) {
	// Store versions sort by descending timestamp, so within a column all
	// locks come first, then write records, then rollbacks, then data —
	// whatever the transaction timestamps.
	kinds := []Kind{KindLock, KindWrite, KindRollback, KindData}
	for i := 1; i < len(kinds); i++ {
		if Tag(kinds[i-1], 0) <= Tag(kinds[i], MaxTs) {
			t.Errorf("%s at ts 0 does not sort before %s at MaxTs", kinds[i-1], kinds[i])
		}
	}
	for _, k := range kinds {
		for _, ts := range []uint64{0, 1, 12345, MaxTs} {
			gk, gts := Untag(Tag(k, ts))
			if gk != k || gts != ts {
				t.Errorf("Untag(Tag(%s,%d)) = %s,%d", k, ts, gk, gts)
			}
		}
	}
}

// A store that chooses a read's timestamp adds it to the bounds
// ReadSpansNow marks in ReadSpans(0): that must give ReadSpans(ts), for
// any timestamp the oracle can give.
func TestReadSpansNowGivesReadSpansAtTheTimestamp(t *testing.T) {
	for _, ts := range []uint64{1, 2, 1 << 20, 1<<40 + 12345, MaxTs - 1, MaxTs} {
		got := ReadSpans(0)
		for j := range got {
			if ReadSpansNow&(1<<j) != 0 {
				got[j].MaxTs += ts
			}
		}
		if want := ReadSpans(ts); !slices.Equal(got, want) {
			t.Errorf("ts %d: ReadSpans(0) moved by ReadSpansNow = %+v, want ReadSpans(ts) = %+v", ts, got, want)
		}
	}
}

// A store that draws the commit timestamp adds it to the mutations
// CommitPrimaryNow marks in CommitPrimary(k, startTs, 0, w): that must give
// CommitPrimary(k, startTs, commitTs, w).
func TestCommitPrimaryNowGivesTheCommitPointAtTheTimestamp(t *testing.T) {
	k := Key{Table: "t", Row: []byte("r"), Column: store.Column{Family: "f", Qualifier: "q"}}
	w := &Write{StartTs: 5, Op: OpPut, Inline: true, Value: []byte("v")}
	for _, commitTs := range []uint64{6, 1 << 30, MaxTs} {
		got := CommitPrimary(k, 5, 0, w)
		for i := range got.Mutations {
			if CommitPrimaryNow&(1<<i) != 0 {
				got.Mutations[i].Ts += commitTs
			}
		}
		want := CommitPrimary(k, 5, commitTs, w)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("commit %d: CommitPrimary(0) moved by CommitPrimaryNow = %+v, want %+v", commitTs, got, want)
		}
	}
}

func TestLockRoundTrip(t *testing.T) {
	l := &Lock{
		StartTs: 1 << 50,
		Primary: Key{Table: "t\x00", Row: []byte{0, 0xff}, Column: store.Column{Family: "f", Qualifier: "q:x"}},
		Op:      OpPut, Inline: true, Value: []byte("v"), WallMs: 1234, TTLMs: 20000, Holder: "w-1", Secondaries: 3,
	}
	got, err := DecodeLock(EncodeLock(l))
	if err != nil {
		t.Fatal(err)
	}
	if got.StartTs != l.StartTs || got.Primary.Table != l.Primary.Table || !bytes.Equal(got.Primary.Row, l.Primary.Row) ||
		got.Primary.Column != l.Primary.Column || got.Op != l.Op || !got.Inline || string(got.Value) != "v" ||
		got.WallMs != 1234 || got.TTLMs != 20000 || got.Holder != "w-1" || got.Secondaries != 3 {
		t.Fatalf("round trip: got %+v, want %+v", got, l)
	}
	enc := EncodeLock(l)
	for n := 0; n < len(enc); n++ {
		if _, err := DecodeLock(enc[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: err = %v, want ErrCorrupt", n, err)
		}
	}
}

func TestWriteRoundTrip(t *testing.T) {
	for _, w := range []*Write{
		{StartTs: 7, Op: OpPut, Inline: true, Value: []byte("short")},
		{StartTs: 1 << 40, Op: OpPut},
		{StartTs: 9, Op: OpDelete},
	} {
		got, err := DecodeWrite(EncodeWrite(w))
		if err != nil {
			t.Fatal(err)
		}
		if got.StartTs != w.StartTs || got.Op != w.Op || got.Inline != w.Inline || !bytes.Equal(got.Value, w.Value) {
			t.Errorf("round trip: got %+v, want %+v", got, w)
		}
		if !bytes.HasPrefix(EncodeWrite(w), StartTsPrefix(w.StartTs)) {
			t.Errorf("write record of %d does not start with its start ts prefix", w.StartTs)
		}
	}
	if _, err := DecodeWrite([]byte{1, 2, 3}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("short record: err = %v", err)
	}
}

// TestDecide is the resolution rule table: what a transaction that meets a
// lock does, given what became of the lock's primary.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		state     TxnState
		abandoned bool
		force     bool
		want      Action
	}{
		{StateCommitted, false, false, ActionRollForward},
		{StateCommitted, true, true, ActionRollForward}, // a commit is final, whatever else
		{StateRolledBack, false, false, ActionRollBack},
		{StateLocked, false, false, ActionWait},
		{StateLocked, true, false, ActionRollBackPrimary},
		{StateLocked, false, true, ActionRollBackPrimary},
		// A missing primary is never "committed": parallel prewrite may not
		// have reached it yet.
		{StateMissing, false, false, ActionWait},
		{StateMissing, true, false, ActionRollBackPrimary},
	} {
		if got := Decide(Status{State: tc.state}, tc.abandoned, tc.force); got != tc.want {
			t.Errorf("Decide(%s, abandoned=%v, force=%v) = %s, want %s", tc.state, tc.abandoned, tc.force, got, tc.want)
		}
	}
}

func TestAbandoned(t *testing.T) {
	l := &Lock{WallMs: 1000, TTLMs: 500}
	if Abandoned(l, 1500, true) {
		t.Error("lock at exactly its TTL is not yet abandoned")
	}
	if !Abandoned(l, 1501, true) {
		t.Error("lock past its TTL is abandoned")
	}
	if !Abandoned(l, 0, false) {
		t.Error("lock of a dead holder is abandoned at once")
	}
}

func cell(k Kind, ts uint64, v []byte) store.Cell {
	return store.Cell{Row: []byte("r"), Column: store.Column{Family: "f", Qualifier: "q"}, Ts: Tag(k, ts), Value: v}
}

func TestInterpretStatus(t *testing.T) {
	lock := EncodeLock(&Lock{StartTs: 10, Op: OpPut, Holder: "h"})
	someoneElses := EncodeLock(&Lock{StartTs: 12, Op: OpPut, Holder: "h"})
	commit := EncodeWrite(&Write{StartTs: 10, Op: OpPut})
	other := EncodeWrite(&Write{StartTs: 11, Op: OpPut})
	for _, tc := range []struct {
		name  string
		cells []store.Cell
		want  TxnState
	}{
		{"nothing", nil, StateMissing},
		{"lock", []store.Cell{cell(KindLock, 0, lock)}, StateLocked},
		{"another transaction's lock", []store.Cell{cell(KindLock, 0, someoneElses)}, StateMissing},
		{"someone else's commit", []store.Cell{cell(KindWrite, 20, other)}, StateMissing},
		{"committed", []store.Cell{cell(KindWrite, 30, other), cell(KindWrite, 20, commit)}, StateCommitted},
		{"rolled back", []store.Cell{cell(KindRollback, 10, nil)}, StateRolledBack},
	} {
		st, err := InterpretStatus(tc.cells, 10)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != tc.want {
			t.Errorf("%s: state %s, want %s", tc.name, st.State, tc.want)
		}
	}
}

// TestPlanGC checks the collection rules on one column, including the
// safe-point boundary (inclusive: a write committed at the safe point is
// what a snapshot at the safe point reads).
func TestPlanGC(t *testing.T) {
	w := func(start uint64, op Op, inline bool) []byte {
		return EncodeWrite(&Write{StartTs: start, Op: op, Inline: inline})
	}
	cells := []store.Cell{
		cell(KindWrite, 50, w(45, OpPut, false)), // above sp: kept
		cell(KindWrite, 40, w(35, OpPut, false)), // newest <= sp: kept
		cell(KindWrite, 30, w(25, OpDelete, false)),
		cell(KindWrite, 20, w(15, OpPut, false)),
		cell(KindRollback, 38, nil), // below sp, a kept commit (40) is newer: removed
		cell(KindRollback, 60, nil), // above sp: kept
		cell(KindData, 45, []byte("d45")),
		cell(KindData, 35, []byte("d35")),
		cell(KindData, 15, []byte("d15")), // its write is removed
		cell(KindData, 12, []byte("orphan")),
	}
	plan, err := PlanGC(cells, 40, false)
	if err != nil {
		t.Fatal(err)
	}
	deleted := map[uint64]bool{}
	for _, m := range plan.Deletions {
		deleted[m.Ts] = true
	}
	want := map[uint64]bool{Tag(KindWrite, 30): true, Tag(KindWrite, 20): true, Tag(KindRollback, 38): true, Tag(KindData, 15): true, Tag(KindData, 12): true}
	for ts := range want {
		if !deleted[ts] {
			k, x := Untag(ts)
			t.Errorf("%s@%d not deleted", k, x)
		}
	}
	for ts := range deleted {
		if !want[ts] {
			k, x := Untag(ts)
			t.Errorf("%s@%d deleted but must stay", k, x)
		}
	}

	// A newest-visible delete goes too; a rollback with no later commit stays.
	deletion := []store.Cell{cell(KindWrite, 30, w(25, OpDelete, true)), cell(KindWrite, 20, w(15, OpPut, true)), cell(KindRollback, 28, nil)}
	plan, err = PlanGC(deletion, 40, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Deletions) != 2 || plan.Deletions[0].Ts != Tag(KindWrite, 30) || plan.Deletions[1].Ts != Tag(KindWrite, 20) || !plan.RemovesDeletion {
		t.Errorf("deletions %+v (removes deletion %v), want the delete and put records, reported", plan.Deletions, plan.RemovesDeletion)
	}
	// Kept while its notification is pending: the delete record stays (a
	// deletion's observer tells it by that record), the rest below goes.
	plan, err = PlanGC(deletion, 40, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Deletions) != 2 || plan.Deletions[0].Ts != Tag(KindWrite, 20) || plan.Deletions[1].Ts != Tag(KindRollback, 28) || plan.RemovesDeletion {
		t.Errorf("deletions %+v (removes deletion %v), want the older put and the rollback record", plan.Deletions, plan.RemovesDeletion)
	}

	// Locks below the safe point must be resolved before anything goes.
	plan, err = PlanGC([]store.Cell{cell(KindLock, 0, EncodeLock(&Lock{StartTs: 39, Op: OpPut})), cell(KindWrite, 20, w(15, OpPut, true))}, 40, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Locks) != 1 || len(plan.Deletions) != 0 {
		t.Errorf("plan %+v: want the lock to resolve and no deletion", plan)
	}
	// A lock at the safe point belongs to a running transaction: leave it.
	plan, _ = PlanGC([]store.Cell{cell(KindLock, 0, EncodeLock(&Lock{StartTs: 40, Op: OpPut}))}, 40, false)
	if len(plan.Locks) != 0 {
		t.Errorf("lock at the safe point scheduled for resolution")
	}
}

func TestClassifyPrewrite(t *testing.T) {
	lock := EncodeLock(&Lock{StartTs: 9, Op: OpPut, Holder: "other"})
	own := EncodeLock(&Lock{StartTs: 10, Op: OpPut, Holder: "me"})
	for _, tc := range []struct {
		name string
		res  store.RowResult
		want PrewriteOutcome
	}{
		{"applied", store.RowResult{Applied: true, FailedCheck: -1}, PrewriteOK},
		{"rolled back", store.RowResult{FailedCheck: PrewriteCheckRollback, Conflict: &store.Cell{Ts: Tag(KindRollback, 10)}}, PrewriteRolledBack},
		{"write conflict", store.RowResult{FailedCheck: PrewriteCheckWrite, Conflict: &store.Cell{Ts: Tag(KindWrite, 12)}}, PrewriteWriteConflict},
		{"other lock", store.RowResult{FailedCheck: PrewriteCheckLock, Conflict: &store.Cell{Ts: LockTs, Value: lock}}, PrewriteLocked},
		{"own lock (retried prewrite)", store.RowResult{FailedCheck: PrewriteCheckLock, Conflict: &store.Cell{Ts: LockTs, Value: own}}, PrewriteOK},
	} {
		got, _, _, err := ClassifyPrewrite(tc.res, 10)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestNotifyColumnRoundTrip(t *testing.T) {
	for _, c := range []store.Column{{Family: "f", Qualifier: "q"}, {Family: "a:b", Qualifier: ""}, {Family: "x", Qualifier: "\x00\xff:y"}} {
		got, err := ObservedColumn(NotifyColumn(c))
		if err != nil || got != c {
			t.Errorf("ObservedColumn(NotifyColumn(%v)) = %v, %v", c, got, err)
		}
	}
	// Families and qualifiers that concatenate alike stay distinct.
	if NotifyColumn(store.Column{Family: "ab", Qualifier: "c"}) == NotifyColumn(store.Column{Family: "a", Qualifier: "bc"}) {
		t.Error("notify columns collide")
	}
	if _, err := ObservedColumn(store.Column{Family: NotifyFamily, Qualifier: "\x09ab"}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated notify qualifier: %v", err)
	}
	k := Key{Table: "t", Row: []byte{0, 1}, Column: store.Column{Family: "f", Qualifier: "q"}}
	got, err := DecodeKey(EncodeKey(k))
	if err != nil || got.Table != k.Table || !bytes.Equal(got.Row, k.Row) || got.Column != k.Column {
		t.Errorf("DecodeKey(EncodeKey(%v)) = %v, %v", k, got, err)
	}
	if _, err := DecodeKey(append(EncodeKey(k), 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("trailing bytes: %v", err)
	}
}

// TestSettleNotification is the rule that keeps notifications from being
// lost: a run at runTs removes only notifications of writes it saw or that
// can never happen.
func TestSettleNotification(t *testing.T) {
	for _, tc := range []struct {
		ts, runTs uint64
		writer    Status
		want      bool
	}{
		{10, 20, Status{State: StateCommitted, CommitTs: 15}, true},
		{10, 20, Status{State: StateCommitted, CommitTs: 20}, true},
		{10, 20, Status{State: StateCommitted, CommitTs: 25}, false}, // committed while the observer ran
		{10, 20, Status{State: StateLocked}, false},                  // still being committed
		{10, 20, Status{State: StateMissing}, false},
		{10, 20, Status{State: StateRolledBack}, true},
		{30, 20, Status{State: StateCommitted, CommitTs: 35}, false}, // written after the run started
	} {
		if got := SettleNotification(tc.ts, tc.runTs, tc.writer); got != tc.want {
			t.Errorf("SettleNotification(%d, %d, %v) = %v, want %v", tc.ts, tc.runTs, tc.writer.State, got, tc.want)
		}
	}
}

func TestNotifyValue(t *testing.T) {
	pk := Key{Table: "t", Row: []byte("r\x00w"), Column: store.Column{Family: "f", Qualifier: "q"}}
	tp := []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	// Values written before trace contexts existed decode as they are.
	for _, c := range []struct {
		name  string
		value []byte
		want  Notify
	}{
		{"standalone", []byte{}, Notify{}},
		{"old writer", EncodeKey(pk), Notify{Primary: pk, HasWriter: true}},
		{"writer", NotifyValue(&pk, nil), Notify{Primary: pk, HasWriter: true}},
		{"traced writer", NotifyValue(&pk, tp), Notify{Primary: pk, HasWriter: true, Trace: tp}},
		{"traced standalone", NotifyValue(nil, tp), Notify{Trace: tp}},
		{"unknown extension", append(EncodeKey(pk), 0x7f, 2, 'x', 'y'), Notify{Primary: pk, HasWriter: true}},
	} {
		got, err := DecodeNotify(c.value)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got.HasWriter != c.want.HasWriter || got.Primary.String() != c.want.Primary.String() || string(got.Trace) != string(c.want.Trace) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
	if !bytes.Equal(NotifyValue(&pk, nil), EncodeKey(pk)) {
		t.Error("an untraced writer's notify value changed")
	}
	if v := NotifyValue(nil, nil); v == nil || len(v) != 0 {
		t.Errorf("standalone notify value = %q, want empty", v)
	}
	for _, bad := range [][]byte{EncodeKey(pk)[:3], append(EncodeKey(pk), extTrace, 9, 'x'), {0x00, extTrace}} {
		if _, err := DecodeNotify(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("DecodeNotify(%q) = %v, want ErrCorrupt", bad, err)
		}
	}
}

// Rule: a multi-cell prewrite makes each cell's checks in the same order
// as a single-cell one, so a failed check maps back to its cell and kind.
func TestPrewriteRowMapsFailuresToCells(t *testing.T) {
	k := func(q string) Key {
		return Key{Table: "t", Row: []byte("r"), Column: store.Column{Family: "f", Qualifier: q}}
	}
	l := &Lock{StartTs: Tag(KindData, 7), Primary: k("p")}
	txn := PrewriteRow([]PrewriteCell{{Key: k("a"), Lock: l, Value: []byte("1")}, {Key: k("b"), Lock: l, Value: []byte("2")}})
	if len(txn.Checks) != 2*PrewriteChecks {
		t.Fatalf("%d checks for 2 cells", len(txn.Checks))
	}
	single := Prewrite(k("b"), l, []byte("2"))
	for i, c := range single.Checks {
		if got := txn.Checks[PrewriteChecks+i]; got.Column != c.Column || got.MinTs != c.MinTs || got.MaxTs != c.MaxTs || got.Expect != c.Expect {
			t.Errorf("check %d of cell 1 = %+v, want %+v", i, got, c)
		}
	}
	cell, res := FailedCell(store.RowResult{FailedCheck: PrewriteChecks + PrewriteCheckWrite})
	if cell != 1 || res.FailedCheck != PrewriteCheckWrite {
		t.Fatalf("FailedCell = %d, %d", cell, res.FailedCheck)
	}
}

// Rule: only a lock written exactly once may be single-deleted. A
// secondary's lock is (prewrite checks the cell unlocked and nothing
// rewrites it); a primary's is rewritten by heartbeats, so every step that
// removes a primary's lock uses a plain delete.
func TestOnlySecondaryLocksAreSingleDeleted(t *testing.T) {
	k := Key{Table: "t", Row: []byte("r"), Column: store.Column{Family: "f", Qualifier: "q"}}
	w := &Write{StartTs: 5, Op: OpPut, Inline: true}
	lockDelete := func(txn *store.RowTxn) store.Mutation {
		for _, m := range txn.Mutations {
			if m.Ts == LockTs && m.Delete {
				return m
			}
		}
		t.Fatalf("%+v removes no lock", txn)
		return store.Mutation{}
	}
	for name, tc := range map[string]struct {
		txn    *store.RowTxn
		single bool
	}{
		"commit primary":           {CommitPrimary(k, 5, 9, w), false},
		"roll back primary":        {Rollback(k, 5, true), false},
		"roll back secondary":      {Rollback(k, 5, false), true},
		"commit secondary":         {CommitSecondary(k, 5, 9, w), true},
		"commit own secondary row": {CommitSecondaryRowLocked([]CommitCell{{Key: k, Write: w}}, 5, 9), true},
	} {
		if got := lockDelete(tc.txn).SingleDelete; got != tc.single {
			t.Errorf("%s: single delete %v, want %v", name, got, tc.single)
		}
	}
}

// Rule: a one-phase commit leaves what a prewrite and a commit at the same
// timestamp leave, minus the lock: its checks are the prewrite's, and its
// mutations, the first rel moved by the commit timestamp, are the
// prewrite's data records, the commit's write records and the extras.
func TestOnePhaseRowIsPrewriteAndCommitWithoutTheLock(t *testing.T) {
	k := func(q string) Key {
		return Key{Table: "t", Row: []byte("r"), Column: store.Column{Family: "f", Qualifier: q}}
	}
	const startTs, commitTs = 50, 1<<40 + 7
	long := bytes.Repeat([]byte("x"), 300)
	locks := []*Lock{
		{StartTs: startTs, Primary: k("a"), Op: OpPut, Inline: true, Value: []byte("1")},
		{StartTs: startTs, Primary: k("a"), Op: OpPut},
		{StartTs: startTs, Primary: k("a"), Op: OpDelete},
	}
	cells := []PrewriteCell{{Key: k("a"), Lock: locks[0], Value: []byte("1")}, {Key: k("b"), Lock: locks[1], Value: long}, {Key: k("c"), Lock: locks[2]}}
	note := store.Mutation{Column: NotifyColumn(k("a").Column), Ts: startTs, Value: []byte("n")}

	one, rel := OnePhaseRow(cells, note)
	if rel != len(cells) {
		t.Fatalf("rel = %d, want %d", rel, len(cells))
	}
	pre := PrewriteRow(cells, note)
	if !reflect.DeepEqual(one.Checks, pre.Checks) {
		t.Errorf("checks %+v, want the prewrite's %+v", one.Checks, pre.Checks)
	}
	var got, want []string
	for i, m := range one.Mutations {
		if i < rel {
			m.Ts += commitTs
		}
		got = append(got, mutationString(m))
	}
	for _, m := range pre.Mutations {
		if m.Ts != LockTs {
			want = append(want, mutationString(m))
		}
	}
	commits := make([]CommitCell, len(cells))
	for i, c := range cells {
		commits[i] = CommitCell{Key: c.Key, Write: &Write{StartTs: startTs, Op: c.Lock.Op, Inline: c.Lock.Inline, Value: c.Lock.Value}}
	}
	for _, m := range CommitSecondaryRow(commits, startTs, commitTs).Mutations {
		if m.Ts != LockTs {
			want = append(want, mutationString(m))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("one phase writes\n%q\nprewrite and commit write\n%q", got, want)
	}
	if one.NoSync {
		t.Error("a one-phase commit is the commit point: it must be synced")
	}
}

func mutationString(m store.Mutation) string {
	kind, ts := Untag(m.Ts)
	return fmt.Sprintf("%s %s@%d del=%v %x", m.Column, kind, ts, m.Delete, m.Value)
}

// A guarded cell of a one-phase row is written as any other, and has no
// checks: the row's checks are those of its other cells, in the
// prewrite's order, so FailedCell still names the right cell.
func TestOnePhaseRowLeavesGuardedCellsUnchecked(t *testing.T) {
	k := func(q string) Key {
		return Key{Table: "t", Row: []byte("r"), Column: store.Column{Family: "f", Qualifier: q}}
	}
	const startTs = 50
	lock := func() *Lock {
		return &Lock{StartTs: startTs, Primary: k("a"), Op: OpPut, Inline: true, Value: []byte("1")}
	}
	all := []PrewriteCell{{Key: k("a"), Lock: lock()}, {Key: k("b"), Lock: lock(), Guarded: true}, {Key: k("c"), Lock: lock()}}
	one, rel := OnePhaseRow(all)
	checked, _ := OnePhaseRow([]PrewriteCell{all[0], all[2]})
	if !reflect.DeepEqual(one.Checks, checked.Checks) {
		t.Errorf("checks %+v, want those of the unguarded cells %+v", one.Checks, checked.Checks)
	}
	unguarded := slices.Clone(all)
	unguarded[1].Guarded = false
	ref, _ := OnePhaseRow(unguarded)
	if rel != len(all) || !reflect.DeepEqual(one.Mutations, ref.Mutations) {
		t.Errorf("mutations %+v (rel %d), want %+v (rel %d)", one.Mutations, rel, ref.Mutations, len(all))
	}
	if c, _ := FailedCell(store.RowResult{FailedCheck: PrewriteChecks + PrewriteCheckWrite}); one.Checks[c*PrewriteChecks].Column != k("c").Column {
		t.Errorf("a failed check of the second checked cell is read as %s's", one.Checks[c*PrewriteChecks].Column)
	}
	if pre := PrewriteRow(all); len(pre.Checks) != PrewriteChecks*len(all) {
		t.Errorf("PrewriteRow made %d checks for %d cells: a prewrite checks every cell", len(pre.Checks), len(all))
	}
}
