package tikvtest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

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
