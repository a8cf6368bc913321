package tikvtest

import (
	"context"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/tikv/client-go/v2/tikvrpc"
)

// A request whose context ended reaches client-go as context.Canceled
// itself, whether the deadline passed before it was sent or while it
// waited out the cluster's latency: any other error would have client-go
// take the mock's store for down, for good.
func TestARequestWhoseContextEndedIsCanceled(t *testing.T) {
	c := New(t, nil)
	cl := &counting{Client: c.rpc, c: c}
	get := func() *tikvrpc.Request {
		return tikvrpc.NewRequest(tikvrpc.CmdGet, &kvrpcpb.GetRequest{Key: []byte("k"), Version: 1})
	}
	late, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := cl.SendRequest(late, "store1", get(), time.Second); err != context.Canceled {
		t.Errorf("a request past its deadline: %v, want context.Canceled itself", err)
	}
	if err := c.SetLatency(Latency{Read: time.Second}); err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if _, err := cl.SendRequest(short, "store1", get(), time.Second); err != context.Canceled {
		t.Errorf("a request whose deadline passed during its latency: %v, want context.Canceled itself", err)
	}
}
