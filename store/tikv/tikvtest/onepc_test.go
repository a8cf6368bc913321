package tikvtest

import (
	"context"
	"testing"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	tikverr "github.com/tikv/client-go/v2/error"
	"github.com/tikv/client-go/v2/metrics"
)

// A transaction of one region that asks for one-phase commit commits in
// one phase: client-go counts it so and says so, the cluster wrote no
// lock, and it is visible from its commit timestamp on, not before. With
// TwoPhaseOnly the cluster answers as client-go's mock does, and the same
// transaction falls back to two phases.
func TestOneRegionCommitsInOnePhase(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *Options
		mode string
		want metrics.TxnCommitCounter
	}{
		{"as TiKV", nil, "1pc", metrics.TxnCommitCounter{OnePC: 1}},
		{"two-phase only", &Options{TwoPhaseOnly: true}, "2pc", metrics.TxnCommitCounter{TwoPC: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(t, tc.opts)
			before := metrics.GetTxnCommitCounter()
			txn, as := begin(t, c.KV, "a", "1", "b", "2")
			if err := txn.Commit(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := counted(before); got != tc.want {
				t.Errorf("client-go counted %+v, want %+v", got, tc.want)
			}
			fellBack := tc.mode == "2pc"
			if as.Mode != tc.mode || as.OnePCFallback != fellBack || as.AsyncCommitFallback != fellBack {
				t.Errorf("client-go says it committed %+v, want mode %s (fallbacks %v)", *as, tc.mode, fellBack)
			}
			if as.CommitTS != txn.CommitTS() || as.CommitTS <= as.StartTS {
				t.Fatalf("commit timestamp %d (callback %d), start %d", txn.CommitTS(), as.CommitTS, as.StartTS)
			}
			for _, k := range []string{"a", "b"} {
				if i := c.mvccOf(k); i.Lock != nil {
					t.Errorf("%s is locked: %v", k, i.Lock)
				}
			}
			if got := readAt(t, c.KV, as.CommitTS, "a"); got != "1" {
				t.Errorf("a at its commit timestamp: %q, want 1", got)
			}
			if got := readAt(t, c.KV, as.CommitTS-1, "b"); got != "" {
				t.Errorf("b just below its commit timestamp: %q, want none", got)
			}
		})
	}
}

// A one-phase commit commits above every read the cluster has served,
// though the client asks for no more than its start timestamp + 1 (a
// causally consistent transaction draws no timestamp to commit): a
// reader's snapshot, read once, keeps reading the same. And it conflicts
// as a two-phase commit would: a transaction that began before it and
// writes the same key fails.
func TestOnePhaseCommitsAboveReadsAndConflicts(t *testing.T) {
	c := New(t, nil)
	w, as := begin(t, c.KV, "k", "new")
	w.SetCausalConsistency(true)
	loser, _ := begin(t, c.KV, "k", "lost")
	ts := now(t, c.KV)
	for ts <= w.StartTS()+1 {
		ts = now(t, c.KV) // so that start+1, all the client asks for, is below the read
	}
	if got := readAt(t, c.KV, ts, "k"); got != "" {
		t.Fatalf("k before any write: %q", got)
	}
	if err := w.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if as.Mode != "1pc" {
		t.Fatalf("committed %+v, want 1pc", *as)
	}
	if as.CommitTS <= ts {
		t.Errorf("committed at %d, at or below the read at %d", as.CommitTS, ts)
	}
	if got := readAt(t, c.KV, ts, "k"); got != "" {
		t.Errorf("the snapshot at %d read k again: %q, want none still", ts, got)
	}
	if got := readAt(t, c.KV, now(t, c.KV), "k"); got != "new" {
		t.Errorf("k now: %q, want new", got)
	}
	err := loser.Commit(context.Background())
	if !tikverr.IsErrWriteConflict(err) {
		t.Errorf("a transaction that began before the one-phase commit and wrote k: %v, want a write conflict", err)
	}
	if got := readAt(t, c.KV, now(t, c.KV), "k"); got != "new" {
		t.Errorf("k after the conflict: %q, want new", got)
	}
}

// A one-phase prewrite whose commit timestamp would pass the client's
// MaxCommitTs writes ordinary locks and answers no commit timestamp, as
// TiKV does, and the client commits in two phases.
func TestOnePhaseFallsBackPastMaxCommitTs(t *testing.T) {
	c := New(t, nil)
	ts := now(t, c.KV)
	c.commits.observe(ts + 1<<40) // a read far in the future
	p := &kvrpcpb.PrewriteRequest{
		Mutations:    []*kvrpcpb.Mutation{{Op: kvrpcpb.Op_Put, Key: []byte("k"), Value: []byte("v")}},
		PrimaryLock:  []byte("k"),
		StartVersion: ts,
		LockTtl:      3000,
		MinCommitTs:  ts + 1,
		MaxCommitTs:  ts + 1000,
		TryOnePc:     true,
	}
	resp := c.send(t, "k", tikvrpcPrewrite(p)).Resp.(*kvrpcpb.PrewriteResponse)
	if len(resp.Errors) > 0 || resp.OnePcCommitTs != 0 || resp.MinCommitTs != 0 {
		t.Fatalf("prewrite: %v, want no commit timestamp", resp)
	}
	if l := c.mvccOf("k").Lock; l == nil || l.StartTs != ts {
		t.Fatalf("k's lock: %v, want one at %d", l, ts)
	}
	if c.commits.stats.fallbacks.Load() != 1 {
		t.Errorf("fallbacks: %d, want 1", c.commits.stats.fallbacks.Load())
	}
}
