package runner

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/trickle-dev/trickle/cluster"
)

// rowLockEnv is an embedded NATS server with a client, on which workers
// register and take row locks.
type rowLockEnv struct {
	t     *testing.T
	ctx   context.Context
	js    jetstream.JetStream
	quiet *slog.Logger
}

func newRowLockEnv(t *testing.T) *rowLockEnv {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	e, err := cluster.StartEmbedded(cluster.EmbeddedOptions{Port: -1, InsecureNoAuth: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &rowLockEnv{t: t, ctx: ctx, js: js, quiet: quiet}
}

// worker registers a live worker id, scanning or not, until the test ends
// or the returned Liveness is closed.
func (e *rowLockEnv) worker(id string, scans bool) *cluster.Liveness {
	e.t.Helper()
	l, err := cluster.NewLiveness(e.ctx, e.js, id, cluster.LivenessOptions{Bucket: "t_workers", TTL: time.Minute, Scans: scans, Logger: e.quiet})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { l.Close() })
	return l
}

// shared returns id's locks in the shared bucket.
func (e *rowLockEnv) shared(id string) *cluster.RowLocks {
	e.t.Helper()
	l, err := cluster.NewRowLocks(e.ctx, e.js, id, cluster.RowLockOptions{Bucket: "t_rowlocks", Logger: e.quiet})
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// lock takes row's lock through l and reports whether it got it.
func (e *rowLockEnv) lock(l interface {
	TryLock(context.Context, string, []byte) (func(), bool, error)
}, row string) (func(), bool) {
	e.t.Helper()
	release, ok, err := l.TryLock(e.ctx, "t", []byte(row))
	if err != nil {
		e.t.Fatal(err)
	}
	return release, ok
}

// mustLock takes row's lock through l, failing the test if it is refused,
// and checks who then holds it in the shared bucket ("" for nobody).
func (e *rowLockEnv) mustLock(l *rowLocks, row, holder string) func() {
	e.t.Helper()
	release, ok := e.lock(l, row)
	if !ok {
		e.t.Fatalf("the lock of %s was refused", row)
	}
	if h := e.holder(l.shared, row); h != holder {
		e.t.Fatalf("the lock of %s is held by %q in the shared bucket, want %q", row, h, holder)
	}
	return release
}

// holder is who holds row's lock in the shared bucket ("" for nobody).
func (e *rowLockEnv) holder(shared *cluster.RowLocks, row string) string {
	e.t.Helper()
	h, ok, err := shared.Holder(e.ctx, "t", []byte(row))
	if err != nil {
		e.t.Fatal(err)
	}
	if !ok {
		return ""
	}
	return h
}

// A runner alone takes its row locks in process: nothing in the shared
// bucket, and still one holder per row within the process. Once another
// runner is live, it takes them in the shared bucket too, and a row the
// other holds there is busy; a live loader (a worker that does not scan)
// changes nothing.
func TestRowLocksInProcessWhileAlone(t *testing.T) {
	e := newRowLockEnv(t)
	me := e.worker("me", true)
	e.worker("a-loader", false)
	shared := e.shared("me")
	rl := newRowLocks(shared, "me", e.quiet)

	// Until a listing says it is alone, a runner shares its locks.
	e.mustLock(rl, "r1", "me")()
	rl.check(e.ctx, me)
	if !rl.alone.Load() {
		t.Fatal("a runner whose only companion is a loader is not alone")
	}
	release := e.mustLock(rl, "r2", "")
	if _, ok := e.lock(rl, "r2"); ok {
		t.Fatal("a row locked in process was locked again")
	}
	release()
	e.mustLock(rl, "r2", "")()

	other := e.worker("other", true)
	otherShared := e.shared("other")
	rl.check(e.ctx, me)
	if rl.alone.Load() {
		t.Fatal("a runner with another scanning worker live still takes its locks in process")
	}
	release = e.mustLock(rl, "r3", "me")
	if _, ok := e.lock(otherShared, "r3"); ok {
		t.Fatal("the other runner took a row this one holds")
	}
	release()
	if h := e.holder(shared, "r3"); h != "" {
		t.Fatalf("a released lock is still held by %q in the shared bucket", h)
	}
	releaseOther, ok := e.lock(otherShared, "r4")
	if !ok {
		t.Fatal("the other runner could not lock a free row")
	}
	if _, ok := e.lock(rl, "r4"); ok {
		t.Fatal("a row the other runner holds was locked")
	}
	releaseOther()
	// The in-process lock of a row refused in the shared bucket was let go.
	e.mustLock(rl, "r4", "me")()

	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	// follow notices by itself.
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	go rl.follow(ctx, me, 10*time.Millisecond)
	for deadline := time.Now().Add(30 * time.Second); !rl.alone.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("follow did not notice that the other runner is gone")
		}
	}
}
