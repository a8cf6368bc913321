package runner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/runner"
)

// TestRealTiKVCluster runs two runners and a writer against a real TiKV
// cluster, when TRICKLE_TEST_PD names its PD endpoints (host:port,...) and
// TRICKLE_TEST_NATS a NATS server (2.11 or later, JetStream on); TLS to
// the cluster comes from TRICKLE_TEST_TIKV_CA, _CERT and _KEY if set, and
// NATS credentials from the usual TRICKLE_NATS_* variables. It works in a
// namespace of its own, so it leaves the cluster's other data alone.
func TestRealTiKVCluster(t *testing.T) {
	pd, natsURL := os.Getenv("TRICKLE_TEST_PD"), os.Getenv("TRICKLE_TEST_NATS")
	if pd == "" || natsURL == "" {
		t.Skip("set TRICKLE_TEST_PD=host:port[,host:port] and TRICKLE_TEST_NATS=nats://host:port to run against a real TiKV cluster")
	}
	natsOpts, err := cluster.ConnectOptionsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("trickletest%d", time.Now().UnixNano())
	deployment := func(id string) runner.Deployment {
		return runner.Deployment{Store: runner.TiKVScheme + pd, NATSURL: natsURL, NATS: natsOpts, Namespace: ns,
			TiKV:    runner.TiKVOptions{CAPath: os.Getenv("TRICKLE_TEST_TIKV_CA"), CertPath: os.Getenv("TRICKLE_TEST_TIKV_CERT"), KeyPath: os.Getenv("TRICKLE_TEST_TIKV_KEY")},
			DataDir: t.TempDir(), WorkerID: id, LivenessTTL: 3 * time.Second, Logger: quiet()}
	}
	src, dst := framework.Column{Family: "f", Qualifier: "src"}, framework.Column{Family: "f", Qualifier: "dst"}
	reg := func() *framework.Registry {
		r := framework.NewRegistry()
		if err := r.Register(framework.Observer{Name: "upper", Table: "t", Columns: []framework.Column{src}, Kind: framework.Strong,
			Fn: func(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
				v, err := tx.Get(ctx, "t", row, src)
				if err != nil {
					return err
				}
				return tx.Set("t", row, dst, bytes.ToUpper(v))
			}}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)
	var runners []*runner.Runner
	for _, id := range []string{"real-1", "real-2"} {
		r, err := runner.Start(ctx, runner.Config{Deployment: deployment(id), HTTPAddr: "off", GCInterval: 2 * time.Second, GCLag: time.Second}, reg())
		if err != nil {
			t.Fatal(err)
		}
		runners = append(runners, r)
		go func() { done <- r.Run(runCtx) }()
	}
	defer func() {
		stop()
		for range runners {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
		}
		for _, r := range runners {
			r.Close()
		}
	}()
	w, err := runner.Open(ctx, deployment("real-writer"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	db, err := w.OpenDB(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 50
	for i := range rows {
		if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			return tx.Set("t", fmt.Appendf(nil, "r%03d", i), src, fmt.Appendf(nil, "value %d", i))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if stuck, err := runner.Wait(ctx, w, runner.WaitOptions{}); err != nil || len(stuck) > 0 {
		t.Fatalf("wait: %v, stuck %v", err, stuck)
	}
	err = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for i := range rows {
			v, err := tx.Get(ctx, "t", fmt.Appendf(nil, "r%03d", i), dst)
			if err != nil {
				return fmt.Errorf("r%03d: %w", i, err)
			}
			if want := fmt.Sprintf("VALUE %d", i); string(v) != want {
				return fmt.Errorf("r%03d: %q, want %q", i, v, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for admin.SafePoint(runners[0].DB()) == 0 && admin.SafePoint(runners[1].DB()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no runner collected garbage within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
