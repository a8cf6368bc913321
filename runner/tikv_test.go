package runner_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/loader"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
	"github.com/trickle-dev/trickle/runner"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// mockStore is the store URL of the tests on the TiKV mock: it must name a
// TiKV store, but TiKVOptions.Client replaces the connection to it.
const mockStore = "tikv://mock-pd:2379"

// startNATS starts a NATS server for a test, as a deployment on TiKV
// needs one all its processes share.
func startNATS(t *testing.T) string {
	t.Helper()
	e, err := cluster.StartEmbedded(cluster.EmbeddedOptions{Port: -1, InsecureNoAuth: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e.ClientURL()
}

// tikvDeployment is a process of a deployment on the mock cluster whose
// client is kv. The lock TTL is far beyond the test's deadline: the locks
// of a process that stops are resolved only if its liveness says it is
// gone.
func tikvDeployment(t *testing.T, natsURL string, kv *tikvclient.KVStore, id string) runner.Deployment {
	return runner.Deployment{Store: mockStore, NATSURL: natsURL, TiKV: runner.TiKVOptions{Client: kv},
		DataDir: t.TempDir(), WorkerID: id, LivenessTTL: time.Second, LockTTL: 10 * time.Minute, Logger: quiet()}
}

// failAfter fails every RPC of a client once crashed is set, at once (a
// canceled request is not retried), as for a process that died.
type failAfter struct {
	tikvclient.Client
	crashed *atomic.Bool
	failed  atomic.Int64 // prewrites and commits refused after the crash
}

func (f *failAfter) SendRequest(ctx context.Context, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	if f.crashed.Load() {
		if req.Type == tikvrpc.CmdPrewrite || req.Type == tikvrpc.CmdCommit {
			f.failed.Add(1)
		}
		return nil, context.Canceled
	}
	return f.Client.SendRequest(ctx, addr, req, timeout)
}

// loadPages writes changes through the web index's loader engine, as
// cmd/loader does.
func loadPages(ctx context.Context, t *testing.T, db *framework.DB, changes []sample.Change) {
	t.Helper()
	src := func(yield func(input.Record, error) bool) {
		for i, ch := range changes {
			if !yield(input.Record{URL: ch.URL, Body: ch.HTML, Delete: ch.Op == sample.Delete, Source: "test", Offset: -1, Line: i + 1}, nil) {
				return
			}
		}
	}
	sum, err := loader.Run(ctx, db, src, loader.Options{MaxBody: sample.MaxBody, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.OK() {
		t.Fatalf("loading: %d bad, %d failed, %d abandoned", sum.Bad, sum.Failed, sum.Abandoned)
	}
}

// TestRunnersShareTiKVWithoutOwner: three runners and a loader, each with
// its own client of one TiKV cluster and all on one NATS server, index a
// corpus with no process owning anything. Midway one runner dies: its TiKV
// requests fail from one moment on, its commits in flight leave their
// locks, and it stops. The others take over its notifications and resolve
// its locks because its liveness is gone (the lock TTL is beyond the
// test's deadline), and the index ends equal to a computation from scratch.
// Collection runs meanwhile in whichever runner holds the GC lease.
func TestRunnersShareTiKVWithoutOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	natsURL := startNATS(t)
	c := tikvtest.New(t, nil)
	ix, err := webindex.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Fewer transactions in flight in a race build, where the mock is
	// slow enough for TiKV-level lock waits to pile up.
	workers := 8
	if raceEnabled {
		workers = 2
	}
	var crashed atomic.Bool
	victimRPCs := &failAfter{crashed: &crashed}

	var runners []*runner.Runner
	var wg sync.WaitGroup
	runCtx, stopAll := context.WithCancel(ctx)
	defer func() { stopAll(); wg.Wait() }()
	victimCtx, stopVictim := context.WithCancel(runCtx)
	defer stopVictim()
	victimDone := make(chan struct{})
	for i, id := range []string{"r1", "r2", "victim"} {
		kv := c.Client(t, nil)
		rctx := runCtx
		if id == "victim" {
			kv = c.Client(t, func(cl tikvclient.Client) tikvclient.Client { victimRPCs.Client = cl; return victimRPCs })
			rctx = victimCtx
		}
		reg := framework.NewRegistry()
		if err := ix.Register(reg); err != nil {
			t.Fatal(err)
		}
		cfg := runner.Config{Deployment: tikvDeployment(t, natsURL, kv, id), HTTPAddr: "off", Workers: workers, Scanners: 2,
			GCInterval: 5 * time.Second, GCLag: 20 * time.Second}
		if i == 1 {
			cfg.DataDir = runners[0].Node().Deployment().DataDir // no directory lock on TiKV
		}
		r, err := runner.Start(ctx, cfg, reg)
		if err != nil {
			t.Fatalf("runner %s: %v", id, err)
		}
		t.Cleanup(func() { r.Close() })
		if r.Node().Owner() || r.Node().TiKV() == nil {
			t.Fatalf("runner %s: owner %v, on TiKV %v; want no owner, on TiKV", id, r.Node().Owner(), r.Node().TiKV() != nil)
		}
		runners = append(runners, r)
		run := func() {
			if err := r.Run(rctx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("runner %s: %v", id, err)
			}
		}
		if id == "victim" {
			go func() { defer close(victimDone); run() }()
		} else {
			wg.Go(run)
		}
	}
	victim := runners[2]

	// The loader: a process of its own, with its own client.
	ld, err := runner.Open(ctx, tikvDeployment(t, natsURL, c.Client(t, nil), "loader"))
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	if err := ld.StartLiveness(ctx, "loader"); err != nil {
		t.Fatal(err)
	}
	observers := framework.NewRegistry()
	if err := ix.Register(observers); err != nil {
		t.Fatal(err)
	}
	db, err := ld.OpenDB(ctx, observers)
	if err != nil {
		t.Fatal(err)
	}

	size, victimRuns := 120, uint64(20)
	if raceEnabled || testing.Short() {
		size, victimRuns = 20, 5
	}
	corpus := sample.Generate(1, size)
	var all []sample.Change
	for d := range corpus.All() {
		all = append(all, sample.Change{Op: sample.Add, URL: d.URL, HTML: d.HTML})
	}
	half := len(all) / 2
	loadPages(ctx, t, db, all[:half])
	// Let the victim get to work, then kill it in the middle of it.
	for victim.Stats().Runs < victimRuns {
		if ctx.Err() != nil {
			t.Fatalf("the victim ran %d observers before the deadline", victim.Stats().Runs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The crash: its TiKV requests fail from now on, and its NATS
	// connection is gone, so its liveness token expires (it is not
	// deleted, as a clean shutdown would).
	crashed.Store(true)
	victim.Node().Conn().Close()
	ranBefore := victim.Stats().Runs
	stopVictim()
	<-victimDone
	loadPages(ctx, t, db, all[half:])
	step := corpus.Step(2, 0.1)
	loadPages(ctx, t, db, step)

	if stuck, err := runner.Wait(ctx, ld, runner.WaitOptions{}); err != nil || len(stuck) > 0 {
		t.Fatalf("waiting for the index: %v (stuck: %v)", err, stuck)
	}
	pages, err := corpus.Pages()
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, ch := range step {
		changed = append(changed, ch.URL)
	}
	checked, diffs, err := ix.Verify(ctx, runners[0].DB(), batch.Compute(pages), changed, []string{sample.Word(0), sample.Word(1) + " " + sample.Word(2)}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diffs {
		t.Error("index differs from batch:", d)
	}
	if pending, err := admin.Pending(ctx, runners[0].Node().Store(), nil); err != nil || pending != 0 {
		t.Fatalf("pending after wait: %d, %v", pending, err)
	}
	r0, r1 := runners[0].Stats(), runners[1].Stats()
	t.Logf("%d pages checked; runs: r1 %d, r2 %d, victim %d before its death; victim's prewrites and commits refused: %d",
		checked, r0.Runs, r1.Runs, ranBefore, victimRPCs.failed.Load())
	if r0.Runs == 0 || r1.Runs == 0 {
		t.Errorf("a surviving runner ran nothing: r1 %d, r2 %d", r0.Runs, r1.Runs)
	}
	// Collection ran somewhere, through the GC lease.
	deadline := time.Now().Add(30 * time.Second)
	for admin.SafePoint(runners[0].DB()) == 0 && admin.SafePoint(runners[1].DB()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no runner collected garbage")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
