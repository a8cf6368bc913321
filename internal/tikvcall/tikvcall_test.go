package tikvcall

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/tikv/client-go/v2/tikvrpc"
)

// A scan abandoned when its caller's context ends returns at once, and
// the request left in flight is not the caller's: client-go reads its
// request again after the call (metrics, a retry) while the client that
// is still sending the abandoned one writes the region's context into it.
func TestAbandonedScanDoesNotWriteIntoTheCallersRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started, release, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	call := scansWithin(ctx).Wrap(func(_ string, req *tikvrpc.Request) (*tikvrpc.Response, error) {
		close(started)
		<-release
		tikvrpc.AttachContext(req, kvrpcpb.Context{RegionId: 7})
		close(finished)
		return &tikvrpc.Response{}, nil
	})
	go func() { <-started; cancel() }()
	req := tikvrpc.NewRequest(tikvrpc.CmdScan, &kvrpcpb.ScanRequest{StartKey: []byte("a")})
	if _, err := call("store-1", req); !errors.Is(err, context.Canceled) {
		t.Fatalf("scan abandoned by its context: got %v, want context.Canceled", err)
	}
	close(release)
	<-finished
	if c := req.Scan().Context; c != nil && c.RegionId == 7 {
		t.Fatal("the abandoned request wrote its context into the caller's request")
	}
	if req.RegionId == 7 {
		t.Fatal("the abandoned request wrote its context into the caller's request")
	}
}

// A request that is not a scan, or a scan whose context cannot end, goes
// straight through.
func TestOnlyScansWithADeadlineAreWatched(t *testing.T) {
	var seen *tikvrpc.Request
	next := func(_ string, req *tikvrpc.Request) (*tikvrpc.Response, error) {
		seen = req
		return &tikvrpc.Response{}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	get := tikvrpc.NewRequest(tikvrpc.CmdGet, &kvrpcpb.GetRequest{Key: []byte("a")})
	if _, err := scansWithin(ctx).Wrap(next)("s", get); err != nil || seen != get {
		t.Fatalf("a get was not passed through as it was: %v", err)
	}
	scan := tikvrpc.NewRequest(tikvrpc.CmdScan, &kvrpcpb.ScanRequest{})
	if _, err := scansWithin(context.Background()).Wrap(next)("s", scan); err != nil || seen != scan {
		t.Fatalf("a scan without a deadline was not passed through as it was: %v", err)
	}
}

// A scan cut at its caller's deadline ends with context.Canceled, the
// one error client-go does not take for a failed store.
func TestAScanCutAtADeadlineIsCanceled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	release := make(chan struct{})
	defer close(release)
	call := scansWithin(ctx).Wrap(func(string, *tikvrpc.Request) (*tikvrpc.Response, error) {
		<-release
		return &tikvrpc.Response{}, nil
	})
	req := tikvrpc.NewRequest(tikvrpc.CmdScan, &kvrpcpb.ScanRequest{})
	if _, err := call("store-1", req); err != context.Canceled {
		t.Fatalf("scan past its deadline: %v, want context.Canceled itself", err)
	}
	if _, err := call("store-1", req); err != context.Canceled {
		t.Fatalf("scan sent after its deadline: %v, want context.Canceled itself", err)
	}
}
