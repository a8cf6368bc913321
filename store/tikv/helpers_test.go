package tikv_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tikv/client-go/v2/testutils"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"

	"github.com/trickle-dev/trickle/store/storetest"
	"github.com/trickle-dev/trickle/store/tikv"
)

var bg = context.Background()

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// mockOptions shape a mock cluster.
type mockOptions struct {
	// regions splits the key space at these keys (more regions); none
	// means a single region.
	splits [][]byte
	// hijack, if set, wraps the client's RPCs.
	hijack func(tikvclient.Client) tikvclient.Client
	// opts are the store's options; Groups default to storetest.Groups.
	opts tikv.Options
}

// openMock opens a store on a fresh in-process mock TiKV cluster.
func openMock(t testing.TB, mo mockOptions) *tikv.Store {
	t.Helper()
	client, cluster, pdClient, err := testutils.NewMockTiKV("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(mo.splits) == 0 {
		testutils.BootstrapWithSingleStore(cluster)
	} else {
		testutils.BootstrapWithMultiRegions(cluster, mo.splits...)
	}
	kv, err := tikvclient.NewTestTiKVStore(client, pdClient, mo.hijack, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	o := mo.opts
	if o.Groups == nil {
		o.Groups = storetest.Groups
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	s, err := tikv.New(bg, kv, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// regionSplits returns split keys that put the rows "r000".."r099" of
// table "t" (and every group boundary) in regions of their own every few
// rows, in the default namespace.
func regionSplits() [][]byte {
	var splits [][]byte
	for g := byte(0); g < 4; g++ {
		splits = append(splits, append([]byte(tikv.DefaultNamespace+"\x00"), g))
	}
	for i := 0; i < 100; i += 7 {
		splits = append(splits, tikv.CellKeyForTest(tikv.DefaultNamespace, 1, "t", fmt.Appendf(nil, "r%03d", i)))
	}
	// Split inside the tables and rows the conformance suite uses too.
	for _, s := range []string{"t", "t\x00", "\xfft"} {
		splits = append(splits, tikv.CellKeyForTest(tikv.DefaultNamespace, 1, s, []byte("a\x00")))
		splits = append(splits, tikv.CellKeyForTest(tikv.DefaultNamespace, 1, s, []byte("m")))
	}
	return splits
}

// countingClient counts the RPCs a store sends, by command.
type countingClient struct {
	tikvclient.Client
	n       atomic.Int64
	commits atomic.Int64
	gets    atomic.Int64 // single-key Gets
	batches atomic.Int64 // BatchGets
	// onPrewrite, if set, is called before every prewrite request is
	// sent.
	onPrewrite func()
	// onCommit, if set, replaces the response of every commit request
	// after the real one was served.
	onCommit func(*tikvrpc.Response) *tikvrpc.Response
}

func (c *countingClient) SendRequest(ctx context.Context, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	c.n.Add(1)
	switch req.Type {
	case tikvrpc.CmdGet:
		c.gets.Add(1)
	case tikvrpc.CmdBatchGet:
		c.batches.Add(1)
	}
	if req.Type == tikvrpc.CmdPrewrite && c.onPrewrite != nil {
		c.onPrewrite()
	}
	resp, err := c.Client.SendRequest(ctx, addr, req, timeout)
	if req.Type == tikvrpc.CmdCommit {
		c.commits.Add(1)
		if c.onCommit != nil && err == nil {
			resp = c.onCommit(resp)
		}
	}
	return resp, err
}
