package tikvtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
)

// A collection (client-go's GC, which moves PD's safe point) has the mock
// drop what no snapshot at or above the safe point reads, as TiKV's
// collection does: an overwritten version and a deleted key's versions,
// in every chunk it goes through.
func TestACollectionDropsVersionsBelowTheSafePoint(t *testing.T) {
	c := New(t, nil)
	ctx := context.Background()
	write := func(k, v string) uint64 {
		txn, err := c.KV.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if v == "" {
			err = txn.Delete([]byte(k))
		} else {
			err = txn.Set([]byte(k), []byte(v))
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return txn.CommitTS()
	}
	many := func(v string) uint64 {
		txn, err := c.KV.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2*gcChunk + 5 {
			if err := txn.Set(fmt.Appendf(nil, "m%05d", i), []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return txn.CommitTS()
	}
	old := many("1")
	many("2")
	first := write("a", "1")
	write("a", "2")
	bWritten := write("b", "1")
	write("b", "")
	read := func(k string, at uint64) string {
		v, err := c.mvcc.Get([]byte(k), at, kvrpcpb.IsolationLevel_SI, nil)
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	if read("a", first) != "1" || read("b", bWritten) != "1" {
		t.Fatal("the versions are not there before the collection")
	}
	sp, err := c.KV.CurrentTimestamp("global")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.KV.GC(ctx, sp); err != nil {
		t.Fatal(err)
	}
	if got := read("a", first); got != "" {
		t.Errorf("a at %d after the collection: %q, want it dropped", first, got)
	}
	if got := read("a", sp); got != "2" {
		t.Errorf("a at the safe point: %q, want 2 (the latest version is kept)", got)
	}
	for _, i := range []int{0, gcChunk, 2*gcChunk + 4} {
		k := fmt.Sprintf("m%05d", i)
		if got := read(k, old); got != "" {
			t.Errorf("%s at %d after the collection: %q, want it dropped", k, old, got)
		}
		if got := read(k, sp); got != "2" {
			t.Errorf("%s at the safe point: %q, want 2", k, got)
		}
	}
	if n := len(c.mvcc.Scan([]byte("b"), []byte("c"), 10, bWritten, kvrpcpb.IsolationLevel_SI, nil)); n != 0 {
		t.Errorf("b's versions below its deletion: %d left, want 0", n)
	}
}
