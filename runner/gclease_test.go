package runner

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

func TestGCLeaseTTL(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{10 * time.Minute, 9 * time.Minute},
		{500 * time.Millisecond, time.Second},
		{time.Second, time.Second},
		{5 * time.Second, 4 * time.Second},
	} {
		if got := gcLeaseTTL(c.in); got != c.want {
			t.Errorf("gcLeaseTTL(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestOneRunnerCollectsPerLease: of the runners of a TiKV deployment
// trying to collect at once, the one that takes the GC lease collects and
// advances TiKV's safe point; the others skip the round.
func TestOneRunnerCollectsPerLease(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := cluster.StartEmbedded(cluster.EmbeddedOptions{Port: -1, InsecureNoAuth: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	c := tikvtest.New(t, nil)
	var runners []*Runner
	var leases []*cluster.RowLocks
	for _, id := range []string{"a", "b", "c"} {
		cfg := Config{Deployment: Deployment{Store: "tikv://mock-pd:2379", NATSURL: e.ClientURL(), TiKV: TiKVOptions{Client: c.Client(t, nil)},
			DataDir: t.TempDir(), WorkerID: id, LivenessTTL: time.Second, Logger: quiet}, HTTPAddr: "off", GCInterval: time.Hour, GCLag: time.Millisecond}
		r, err := Start(ctx, cfg, framework.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		lease, err := cluster.NewRowLocks(ctx, r.node.js, id, cluster.RowLockOptions{Bucket: cfg.Namespace + "_gc", TTL: gcLeaseTTL(cfg.GCInterval), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		runners, leases = append(runners, r), append(leases, lease)
	}
	if err := runners[0].DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("t", []byte("r"), framework.Column{Family: "f", Qualifier: "q"}, []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	collected := make(chan int, len(runners))
	for i, r := range runners {
		go func() {
			if r.collectIfLeader(ctx, leases[i]) {
				collected <- i
			} else {
				collected <- -1
			}
		}()
	}
	leader := -1
	for range runners {
		if i := <-collected; i >= 0 {
			if leader >= 0 {
				t.Fatalf("runners %d and %d both collected in one lease", leader, i)
			}
			leader = i
		}
	}
	if leader < 0 {
		t.Fatal("no runner collected")
	}
	if sp := runners[leader].engine.SafePoint(); sp == 0 {
		t.Fatal("the collecting runner has no safe point")
	}
	// The lease is still held: a round now is skipped by everyone.
	for i, r := range runners {
		if r.collectIfLeader(ctx, leases[i]) {
			t.Fatalf("runner %d collected while the lease was held", i)
		}
	}
}
