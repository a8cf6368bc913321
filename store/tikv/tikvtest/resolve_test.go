package tikvtest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"
)

// A transaction whose secondaries were never committed (its process died
// after its commit point) is rolled forward by the next reader, whose
// resolution goes by the locks' keys: named in the request for a small
// transaction, the ones its prewrites sent for one of 16 keys or more
// (which client-go resolves region-wide). The keys span two regions, so
// that the commit point leaves the other region's locked.
func TestLocksAreResolvedByTheirKeys(t *testing.T) {
	for _, n := range []int{4, 40} {
		t.Run(fmt.Sprint(n, " keys"), func(t *testing.T) {
			c := New(t, &Options{SplitKeys: [][]byte{[]byte("k20")}})
			var commits atomic.Int32
			kv := c.Client(t, func(inner tikvclient.Client) tikvclient.Client {
				return &firstCommitOnly{Client: inner, commits: &commits}
			})
			txn, err := kv.Begin()
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if err := txn.Set(fmt.Appendf(nil, "k%02d", i*40/n), fmt.Appendf(nil, "v%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := txn.Commit(context.Background()); err != nil {
				t.Fatalf("commit (its primary): %v", err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ts, err := c.KV.CurrentTimestamp("global")
			if err != nil {
				t.Fatal(err)
			}
			snap := c.KV.GetSnapshot(ts)
			for i := range n {
				v, err := snap.Get(ctx, fmt.Appendf(nil, "k%02d", i*40/n))
				if err != nil || string(v.Value) != fmt.Sprintf("v%d", i) {
					t.Fatalf("k%02d: %q, %v; want v%d", i*40/n, v.Value, err, i)
				}
			}
			if c.locks.resolved.Load() == 0 {
				t.Fatalf("no lock was resolved by its keys (requests: %s)", c.Summary())
			}
		})
	}
}

// firstCommitOnly loses every commit request after the first (the
// primary's): the process died at its commit point.
type firstCommitOnly struct {
	tikvclient.Client
	commits *atomic.Int32
}

func (c *firstCommitOnly) SendRequest(ctx context.Context, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	if req.Type == tikvrpc.CmdCommit && c.commits.Add(1) > 1 {
		return nil, errors.New("lost")
	}
	return c.Client.SendRequest(ctx, addr, req, timeout)
}

// A ResolveLock of a transaction that has no lock left in the region (it
// committed everywhere) is answered as done without the mock reading the
// region, as TiKV finds its lock column family holding none of it; the
// transaction's writes stay as they are.
func TestAResolutionOfATransactionWithNoLockLeftIsAnsweredAtOnce(t *testing.T) {
	c := New(t, nil)
	txn, err := c.KV.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := txn.Set([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := txn.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bo := tikvclient.NewBackoffer(ctx, 1000)
	loc, err := c.KV.GetRegionCache().LocateKey(bo, []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	before := c.locks.resolved.Load()
	// A rollback of the committed transaction: were any of its locks
	// left, it would remove them; there are none, so nothing changes.
	req := tikvrpc.NewRequest(tikvrpc.CmdResolveLock, &kvrpcpb.ResolveLockRequest{StartVersion: txn.StartTS()})
	resp, err := c.KV.SendReq(bo, req, loc.Region, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := resp.Resp.(*kvrpcpb.ResolveLockResponse); !ok || r.Error != nil {
		t.Fatalf("resolution: %+v, want done", resp.Resp)
	}
	if got := c.locks.resolved.Load() - before; got != 1 {
		t.Errorf("%d resolutions answered by the locks kept, want 1 (the mock read the region)", got)
	}
	ts, err := c.KV.CurrentTimestamp("global")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := c.KV.GetSnapshot(ts).Get(ctx, []byte("k")); err != nil || string(v.Value) != "v" {
		t.Fatalf("k after the resolution: %q, %v; want v", v.Value, err)
	}
}
