package tikvtest

import (
	"context"
	"testing"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/tikv/client-go/v2/metrics"
	"github.com/tikv/client-go/v2/tikvrpc"
)

// twoRegions splits the key space at "m": "a" and "z" are in two regions.
var twoRegions = &Options{SplitKeys: [][]byte{[]byte("m")}}

// A transaction of two regions that asks for async commit commits
// asynchronously: client-go counts it so and says so, and its writes are
// visible from its commit timestamp on, not before. With TwoPhaseOnly it
// falls back to two phases.
func TestManyRegionsCommitAsynchronously(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		mode string
		want metrics.TxnCommitCounter
	}{
		{"as TiKV", *twoRegions, "async_commit", metrics.TxnCommitCounter{AsyncCommit: 1}},
		{"two-phase only", Options{SplitKeys: twoRegions.SplitKeys, TwoPhaseOnly: true}, "2pc", metrics.TxnCommitCounter{TwoPC: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(t, &tc.opts)
			before := metrics.GetTxnCommitCounter()
			txn, as := begin(t, c.KV, "a", "1", "z", "2")
			if err := txn.Commit(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := counted(before); got != tc.want {
				t.Errorf("client-go counted %+v, want %+v", got, tc.want)
			}
			if fellBack := tc.mode == "2pc"; as.Mode != tc.mode || as.AsyncCommitFallback != fellBack || !as.OnePCFallback {
				t.Errorf("client-go says it committed %+v, want mode %s", *as, tc.mode)
			}
			if as.CommitTS != txn.CommitTS() || as.CommitTS <= as.StartTS {
				t.Fatalf("commit timestamp %d (callback %d), start %d", txn.CommitTS(), as.CommitTS, as.StartTS)
			}
			for _, k := range []string{"a", "z"} {
				if got := readAt(t, c.KV, as.CommitTS, k); got == "" {
					t.Errorf("%s at its commit timestamp: none", k)
				}
				if got := readAt(t, c.KV, as.CommitTS-1, k); got != "" {
					t.Errorf("%s just below its commit timestamp: %q, want none", k, got)
				}
			}
		})
	}
}

// A writer dies after its async-commit prewrites all succeeded (none of
// its commits arrives). A reader whose snapshot the cluster served before
// the prewrites reads past the locks (their min_commit_ts is above it)
// without resolving anything; a reader after them finds the locks,
// checks the transaction's status and its secondaries, finds every lock
// there, and so commits the transaction, at the timestamp the writer was
// told.
func TestADeadWriterWhosePrewritesAllSucceededIsCommitted(t *testing.T) {
	c := New(t, twoRegions)
	w := newWriter()
	kv := c.Client(t, w.hijack)
	old, _ := begin(t, c.KV, "a", "old a", "z", "old z")
	// In two phases, its primary a committed before Commit returns: the
	// read at early below meets no lock, and so only the read raises
	// max_ts.
	old.SetEnableAsyncCommit(false)
	old.SetEnable1PC(false)
	if err := old.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	txn, as := begin(t, kv, "a", "new a", "z", "new z")
	txn.SetCausalConsistency(true) // min_commit_ts comes from the cluster's max_ts alone
	as.StartTS = txn.StartTS()
	early := now(t, c.KV)
	for early <= as.StartTS+1 {
		early = now(t, c.KV) // so that start+1, all the client asks for, is below the read
	}
	if got := readAt(t, c.KV, early, "a"); got != "old a" {
		t.Fatalf("a at %d: %q", early, got)
	}
	if err := txn.Commit(context.Background()); err != nil {
		t.Fatalf("commit (its prewrites): %v", err)
	}
	if as.Mode != "async_commit" {
		t.Fatalf("committed %+v, want async_commit", *as)
	}
	if as.CommitTS <= early {
		t.Fatalf("committed at %d, at or below the read at %d", as.CommitTS, early)
	}
	for _, k := range []string{"a", "z"} {
		if l := c.mvccOf(k).Lock; l == nil || l.StartTs != as.StartTS {
			t.Fatalf("%s's lock: %v, want the writer's", k, l)
		}
	}

	checks := c.RPCsByType()[tikvrpc.CmdCheckTxnStatus.String()]
	for _, k := range []string{"a", "z"} {
		if got := readAt(t, c.KV, early, k); got != "old "+k {
			t.Errorf("%s at %d, below the locks' min_commit_ts: %q, want old %s", k, early, got, k)
		}
	}
	if c.commits.stats.readPast.Load() == 0 {
		t.Error("no read went past a lock")
	}
	if got := c.RPCsByType()[tikvrpc.CmdCheckTxnStatus.String()]; got != checks {
		t.Errorf("reading below the locks checked a transaction's status (%d times)", got-checks)
	}

	late := c.expire(t, c.KV)
	if got := readAt(t, c.KV, late, "z"); got != "new z" {
		t.Errorf("z at %d, after the writer's commit timestamp %d: %q, want new z", late, as.CommitTS, got)
	}
	if got := readAt(t, c.KV, late, "a"); got != "new a" {
		t.Errorf("a at %d: %q, want new a", late, got)
	}
	if c.commits.stats.asyncStatus.Load() == 0 || c.commits.stats.secondaryChecks.Load() == 0 {
		t.Errorf("resolved without the async way: %d async statuses, %d secondary checks (requests: %s)",
			c.commits.stats.asyncStatus.Load(), c.commits.stats.secondaryChecks.Load(), c.Summary())
	}
	for _, k := range []string{"a", "z"} {
		i := c.mvccOf(k)
		if i.Lock != nil || len(i.Writes) == 0 || i.Writes[0].StartTs != as.StartTS || i.Writes[0].CommitTs != as.CommitTS {
			t.Errorf("%s: lock %v, writes %v; want committed at %d, the writer's commit timestamp", k, i.Lock, i.Writes, as.CommitTS)
		}
		if got := readAt(t, c.KV, as.CommitTS-1, k); got != "old "+k {
			t.Errorf("%s just below the commit timestamp: %q, want old %s", k, got, k)
		}
	}
}

// A writer dies during its async-commit prewrites: its primary's
// arrives, a secondary's never does (until after the transaction is
// resolved). A reader that finds the primary's lock checks the
// secondaries, finds one missing, rolls it back there, and so rolls the
// transaction back: no key is committed, and the lost prewrite, arriving
// late, fails.
func TestADeadWriterWhosePrewriteWasLostIsRolledBack(t *testing.T) {
	c := New(t, twoRegions)
	w := newWriter("z")
	kv := c.Client(t, w.hijack)
	txn, as := begin(t, kv, "a", "new a", "z", "new z")
	done := make(chan error, 1)
	go func() { done <- txn.Commit(context.Background()) }()
	<-w.held
	if k := <-w.prewrote; string(k) != "a" {
		t.Fatalf("prewrote %q, want the primary a", k)
	}
	start := c.mvccOf("a").Lock.GetStartTs()
	late := c.expire(t, c.KV)
	for _, k := range []string{"a", "z"} {
		if got := readAt(t, c.KV, late, k); got != "" {
			t.Errorf("%s: %q, want none", k, got)
		}
	}
	if c.commits.stats.secondaryChecks.Load() == 0 {
		t.Errorf("no secondary checked (requests: %s)", c.Summary())
	}
	close(w.late) // the lost prewrite arrives
	if err := <-done; err == nil {
		t.Errorf("the writer's commit succeeded (%+v), with its transaction rolled back", *as)
	}
	for _, k := range []string{"a", "z"} {
		i := c.mvccOf(k)
		if i.Lock != nil {
			t.Errorf("%s is locked: %v", k, i.Lock)
		}
		for _, wr := range i.Writes {
			if wr.StartTs == start && wr.Type != kvrpcpb.Op_Rollback {
				t.Errorf("%s was committed: %v", k, wr)
			}
		}
		if len(i.Writes) == 0 || i.Writes[0].Type != kvrpcpb.Op_Rollback {
			t.Errorf("%s has no rollback record: %v", k, i.Writes)
		}
	}
}

// A rollback record and a computed commit timestamp's record collide:
// the one-phase commit of a at start+1 (a read at start raised max_ts)
// and the rollback of the transaction that started at start+1. The
// commit stays, the rollback is remembered, and that transaction's
// prewrite of a fails.
func TestARollbackOverAComputedCommitKeepsTheCommit(t *testing.T) {
	c := New(t, nil)
	ts := now(t, c.KV)
	c.commits.observe(ts + 1)
	p := &kvrpcpb.PrewriteRequest{
		Mutations:    []*kvrpcpb.Mutation{{Op: kvrpcpb.Op_Put, Key: []byte("a"), Value: []byte("v")}},
		PrimaryLock:  []byte("a"),
		StartVersion: ts,
		LockTtl:      3000,
		MinCommitTs:  ts + 1,
		TryOnePc:     true,
	}
	resp := c.send(t, "a", tikvrpcPrewrite(p)).Resp.(*kvrpcpb.PrewriteResponse)
	if len(resp.Errors) > 0 || resp.OnePcCommitTs != ts+2 {
		t.Fatalf("prewrite: %v, want committed at %d", resp, ts+2)
	}
	other := ts + 2 // a transaction whose start timestamp is that commit's
	rb := c.send(t, "a", tikvrpc.NewRequest(tikvrpc.CmdBatchRollback, &kvrpcpb.BatchRollbackRequest{StartVersion: other, Keys: [][]byte{[]byte("a")}}))
	if e := rb.Resp.(*kvrpcpb.BatchRollbackResponse).Error; e != nil {
		t.Fatalf("rollback: %v", e)
	}
	if got := readAt(t, c.KV, ts+2, "a"); got != "v" {
		t.Errorf("a at its commit timestamp after the rollback: %q, want v", got)
	}
	p2 := &kvrpcpb.PrewriteRequest{
		Mutations:    []*kvrpcpb.Mutation{{Op: kvrpcpb.Op_Put, Key: []byte("a"), Value: []byte("late")}},
		PrimaryLock:  []byte("a"),
		StartVersion: other,
		LockTtl:      3000,
	}
	if r := c.send(t, "a", tikvrpcPrewrite(p2)).Resp.(*kvrpcpb.PrewriteResponse); len(r.Errors) == 0 {
		t.Error("the rolled-back transaction's prewrite succeeded")
	}
	st := c.send(t, "a", tikvrpc.NewRequest(tikvrpc.CmdCheckTxnStatus, &kvrpcpb.CheckTxnStatusRequest{PrimaryKey: []byte("a"), LockTs: other, CurrentTs: other})).Resp.(*kvrpcpb.CheckTxnStatusResponse)
	if st.Error != nil || st.LockTtl != 0 || st.CommitVersion != 0 {
		t.Errorf("the rolled-back transaction's status: %v, want rolled back", st)
	}
}

// The layout records relies on is the mock's: a lock's record gives its
// start timestamp, a commit's its type and start timestamp, a
// rollback's too.
func TestTheMockRecordLayout(t *testing.T) {
	c := New(t, &Options{TwoPhaseOnly: true})
	r := c.commits.rec
	ts := now(t, c.KV)
	p := &kvrpcpb.PrewriteRequest{
		Mutations:    []*kvrpcpb.Mutation{{Op: kvrpcpb.Op_Put, Key: []byte("a"), Value: []byte("v")}, {Op: kvrpcpb.Op_Del, Key: []byte("b")}},
		PrimaryLock:  []byte("a"),
		StartVersion: ts,
		LockTtl:      3000,
	}
	if errs := c.mvcc.Prewrite(p); len(errs) != 2 || errs[0] != nil || errs[1] != nil {
		t.Fatalf("prewrite: %v", errs)
	}
	if got, ok := r.lockOn([]byte("a")); !ok || got != ts {
		t.Errorf("a's lock: %d, %v; want %d", got, ok, ts)
	}
	if _, ok := r.lockOn([]byte("c")); ok {
		t.Error("c is locked")
	}
	if err := c.mvcc.Commit([][]byte{[]byte("a"), []byte("b")}, ts, ts+5); err != nil {
		t.Fatal(err)
	}
	if err := c.mvcc.Rollback([][]byte{[]byte("c")}, ts); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		ts   uint64
		typ  int64
		from uint64
	}{{"a", ts + 5, recordPut, ts}, {"b", ts + 5, recordDelete, ts}, {"c", ts, recordRollback, ts}} {
		typ, start, ok := writeOf(r.at([]byte(tc.key), tc.ts))
		if !ok || typ != tc.typ || start != tc.from {
			t.Errorf("%s at %d: type %d from %d (%v), want type %d from %d", tc.key, tc.ts, typ, start, ok, tc.typ, tc.from)
		}
	}
	if r.at([]byte("a"), ts) != nil {
		t.Error("a has a record at its start timestamp")
	}
	rec := r.at([]byte("a"), ts+5)
	r.put([]byte("a"), ts+7, rec)
	if v, err := c.mvcc.Get([]byte("a"), ts+7, kvrpcpb.IsolationLevel_SI, nil); err != nil || string(v) != "v" {
		t.Errorf("a record put back at another version reads %q, %v; want v", v, err)
	}
}
