package tikv_test

import (
	"fmt"
	"testing"

	tikvclient "github.com/tikv/client-go/v2/tikv"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// An ApplyAll reads the exact versions its checks name (a prewrite's lock
// and rollback record, a commit's own lock) with BatchGets, not one Get
// RPC per check, and decides exactly as before: a prewrite of a cell
// someone else locked fails on its lock check, the others are applied.
func TestApplyAllPrefetchesExactChecks(t *testing.T) {
	cc := &countingClient{}
	s := openMock(t, mockOptions{hijack: func(c tikvclient.Client) tikvclient.Client { cc.Client = c; return cc }})
	col := store.Column{Family: "f", Qualifier: "v"}
	const rows, startTs, commitTs = 64, 100, 110
	key := func(i int) protocol.Key {
		return protocol.Key{Table: "t", Row: fmt.Appendf(nil, "r%03d", i), Column: col}
	}
	primary := key(0)
	lock := func(ts uint64) *protocol.Lock {
		return &protocol.Lock{StartTs: ts, Primary: primary, Op: protocol.OpPut, Inline: true, Value: []byte("x"), TTLMs: 1000}
	}
	// Someone else holds row 7.
	if res, err := s.Apply(bg, protocol.Prewrite(key(7), lock(90), nil)); err != nil || !res.Applied {
		t.Fatal(res, err)
	}
	prewrites := make([]*store.RowTxn, rows)
	for i := range prewrites {
		prewrites[i] = protocol.Prewrite(key(i), lock(startTs), nil)
	}
	cc.gets.Store(0)
	res, err := s.ApplyAll(bg, prewrites)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if want := i != 7; r.Applied != want || (!want && r.FailedCheck != protocol.PrewriteCheckLock) {
			t.Errorf("prewrite of row %d: %+v, want applied %v", i, r, want)
		}
	}
	commits := make([]*store.RowTxn, 0, rows)
	w := &protocol.Write{StartTs: startTs, Op: protocol.OpPut, Inline: true, Value: []byte("x")}
	for i := range rows {
		commits = append(commits, protocol.CommitSecondaryRowLocked([]protocol.CommitCell{{Key: key(i), Write: w}}, startTs, commitTs))
	}
	res, err = s.ApplyAll(bg, commits)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Applied != (i != 7) {
			t.Errorf("commit of row %d: %+v", i, r)
		}
	}
	if g := cc.gets.Load(); g != 0 {
		t.Errorf("%d single-key Gets for two ApplyAll calls of %d rows, want none (BatchGets: %d)", g, rows, cc.batches.Load())
	}
	if cc.batches.Load() == 0 {
		t.Error("no BatchGet")
	}
}
