package runner_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/runner"
)

var col = framework.Column{Family: "f", Qualifier: "v"}

// ownerAndJoiner starts a runner that owns cfg's data directory and a
// second one that joins it as a client through the owner's NATS server,
// as two processes would; both are closed when the test ends.
func ownerAndJoiner(ctx context.Context, t *testing.T, cfg runner.Config) (owner, joiner *runner.Runner) {
	t.Helper()
	owner, err := runner.Start(ctx, cfg, registry(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	if !owner.Node().Owner() {
		t.Fatal("first runner does not own the data directory")
	}
	cfg2 := cfg
	cfg2.NATSURL = owner.Node().Conn().ConnectedUrl()
	if joiner, err = runner.Start(ctx, cfg2, registry(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { joiner.Close() })
	if joiner.Node().Owner() {
		t.Fatal("second runner on the same data directory claims to own it")
	}
	return owner, joiner
}

func registry(t *testing.T) *framework.Registry {
	reg := framework.NewRegistry()
	err := reg.Register(framework.Observer{Name: "noop", Table: "t", Columns: []framework.Column{{Family: "f", Qualifier: "watched"}}, Kind: framework.Strong,
		Fn: func(context.Context, *framework.Txn, []byte, framework.Column) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// TestGarbageCollectionWaitsForOtherProcesses: the owner collects garbage
// periodically, but never past the oldest transaction a live worker in
// another process (here a second runner that joined as a client) reports.
func TestGarbageCollectionWaitsForOtherProcesses(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	cfg := runner.Config{Deployment: runner.Deployment{DataDir: dir, NATSPort: -1, LivenessTTL: time.Second, Logger: quiet}, HTTPAddr: "off", GCInterval: 200 * time.Millisecond, GCLag: time.Millisecond}
	owner, joiner := ownerAndJoiner(ctx, t, cfg)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go owner.Run(runCtx)
	go joiner.Run(runCtx)

	for i := range 5 {
		if err := owner.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			return tx.Set("t", []byte("r"), col, []byte(strconv.Itoa(i)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A long snapshot in the other process.
	began, release, read := make(chan uint64), make(chan struct{}), make(chan string, 1)
	go func() {
		err := joiner.DB().View(ctx, func(ctx context.Context, tx *framework.Txn) error {
			began <- tx.StartTs()
			<-release
			v, err := tx.Get(ctx, "t", []byte("r"), col)
			read <- string(v)
			return err
		})
		if err != nil {
			read <- err.Error()
		}
	}()
	old := <-began
	deadline := time.Now().Add(20 * time.Second)
	for admin.SafePoint(owner.DB()) == 0 { // collection rounds run...
		if time.Now().After(deadline) {
			t.Fatal("no garbage collection ran")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for r0 := owner.Stats().GCRounds; owner.Stats().GCRounds < r0+2; { // ...two more of them at least
		if time.Now().After(deadline) {
			t.Fatalf("%d garbage collection rounds in 20s", owner.Stats().GCRounds)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if sp := admin.SafePoint(owner.DB()); sp > old {
		t.Fatalf("safe point %d passed a running transaction at %d in another process", sp, old)
	}
	close(release)
	if v := <-read; v != "4" {
		t.Fatalf("old snapshot reads %q", v)
	}
	for admin.SafePoint(owner.DB()) <= old {
		if time.Now().After(deadline) {
			t.Fatal("safe point did not move past the finished transaction")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestOnlyTheOwnerCompactsAfterCollecting: a collection compacts the
// tables it removed much of through the store the owner's node hands out
// (it forwards to the pebble store); a process that reaches the store
// over NATS collects without compacting, and without failing.
func TestOnlyTheOwnerCompactsAfterCollecting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := runner.Config{Deployment: runner.Deployment{DataDir: t.TempDir(), NATSPort: -1, Logger: quiet()}, HTTPAddr: "off"}
	owner, joiner := ownerAndJoiner(ctx, t, cfg)
	for _, tc := range []struct {
		r    *runner.Runner
		want []string
	}{{joiner, nil}, {owner, []string{"t"}}} {
		for i := range 3 {
			if err := owner.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
				return tx.Set("t", []byte("r"), col, []byte(strconv.Itoa(i)))
			}); err != nil {
				t.Fatal(err)
			}
		}
		st, err := admin.GC(ctx, tc.r.DB(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if st.Deleted == 0 || !slices.Equal(st.Compacted, tc.want) {
			t.Errorf("owner %v: removed %d versions and compacted %q, want some removed and %q compacted",
				tc.r.Node().Owner(), st.Deleted, st.Compacted, tc.want)
		}
	}
}

// A private owner (the loader) uses the store but serves nothing, so a
// process that tries to join it fails instead of depending on it.
func TestPrivateOwnerServesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	node, err := runner.Open(ctx, runner.Deployment{DataDir: dir, NATSPort: port, Private: true, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if !node.Owner() || node.Conn() != nil {
		t.Fatalf("private node: owner %v, NATS connection %v", node.Owner(), node.Conn())
	}
	if _, err := node.Oracle().Timestamp(ctx); err != nil {
		t.Fatal(err)
	}
	node.WakeRunners() // no NATS: a no-op, not a crash
	jctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if other, err := runner.Open(jctx, runner.Deployment{DataDir: dir, NATSPort: port, Logger: quiet()}); err == nil {
		other.Close()
		t.Fatal("a second process joined a private owner")
	}
	if _, err := runner.Start(ctx, runner.Config{Deployment: runner.Deployment{DataDir: t.TempDir(), Private: true, Logger: quiet()}}, framework.NewRegistry()); err == nil {
		t.Fatal("a private runner started")
	}
}
