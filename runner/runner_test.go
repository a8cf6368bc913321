package runner_test

import (
	"context"
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
// periodically, with a lag far shorter than the test, but never past the
// oldest transaction running in another process: a second runner that
// joined as a client, or a process that only writes (as a loader does),
// whose DB registers it as a worker that reports its oldest transaction.
// That process's DB then follows the safe point the owner persists.
func TestGarbageCollectionWaitsForOtherProcesses(t *testing.T) {
	for _, other := range []string{"runner", "writer"} {
		t.Run(other, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cfg := runner.Config{Deployment: runner.Deployment{DataDir: t.TempDir(), NATSPort: -1, LivenessTTL: time.Second, Logger: quiet()}, HTTPAddr: "off", GCInterval: 200 * time.Millisecond, GCLag: time.Millisecond}
			var owner, joiner *runner.Runner
			var db *framework.DB
			if other == "runner" {
				owner, joiner = ownerAndJoiner(ctx, t, cfg)
				db = joiner.DB()
			} else {
				var err error
				if owner, err = runner.Start(ctx, cfg, registry(t)); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { owner.Close() })
				d := cfg.Deployment
				d.NATSURL, d.Mode = owner.Node().Conn().ConnectedUrl(), runner.ModeClient
				node, err := runner.Open(ctx, d)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { node.Close() })
				if db, err = node.OpenDB(ctx, nil); err != nil {
					t.Fatal(err)
				}
			}
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			go owner.Run(runCtx)
			if joiner != nil {
				go joiner.Run(runCtx)
			}
			collectionWaitsFor(ctx, t, owner, db)
		})
	}
}

// collectionWaitsFor checks that owner's collections keep what a long
// snapshot of db, in another process, reads, and that db adopts the safe
// point the owner persists once the snapshot is over.
func collectionWaitsFor(ctx context.Context, t *testing.T, owner *runner.Runner, db *framework.DB) {
	t.Helper()
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
		err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
			if _, err := tx.Get(ctx, "t", []byte("r"), col); err != nil { // fixes the snapshot
				return err
			}
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
	var old uint64
	select {
	case old = <-began:
	case v := <-read:
		t.Fatalf("the long snapshot failed: %s", v)
	}
	// Overwritten after the snapshot: a collection past it would remove
	// the version it reads.
	if err := owner.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("t", []byte("r"), col, []byte("new"))
	}); err != nil {
		t.Fatal(err)
	}
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
	for sp := admin.SafePoint(owner.DB()); admin.SafePoint(db) < sp; {
		if time.Now().After(deadline) {
			t.Fatalf("the other process's safe point stays at %d, below the owner's %d", admin.SafePoint(db), sp)
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

// TestCollectionFollowsALoad: with a collection interval far longer than
// the test, the owner still collects once the store settles after work
// (GCSettledAfter timestamps, then a quiet GCLag): its safe point passes
// the work. With GCSettledAfter negative it does not within 30s.
func TestCollectionFollowsALoad(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := runner.Config{Deployment: runner.Deployment{DataDir: t.TempDir(), NATSPort: -1, LivenessTTL: time.Second, Logger: quiet()},
		HTTPAddr: "off", GCInterval: time.Hour, GCLag: 300 * time.Millisecond, GCSettledAfter: 40}
	owner, err := runner.Start(ctx, cfg, registry(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Close() })
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go owner.Run(runCtx)
	var last uint64
	for i := range 40 {
		if err := owner.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			last = tx.StartTs()
			return tx.Set("t", []byte("r"), col, []byte(strconv.Itoa(i)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for admin.SafePoint(owner.DB()) <= last {
		if time.Now().After(deadline) {
			t.Fatalf("no collection passed the load in 30s (%d rounds)", owner.Stats().GCRounds)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
