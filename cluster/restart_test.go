package cluster

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// A runner that takes over a data directory whose owner died starts a new
// embedded server on the same port, with none of the memory-stored buckets.
// Workers connected to the old server reconnect to it; their liveness
// tokens and row locks must work again without restarting them.
func TestBucketsRecreatedAfterServerRestart(t *testing.T) {
	e := startServer(t)
	port := e.Port()
	nc, js := connectJS(t, e)
	w := newLiveness(t, js, "w1", LivenessOptions{TTL: 3 * time.Second, CacheFor: -1})
	locks, err := NewRowLocks(testCtx(t), js, "w1", RowLockOptions{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}

	status := nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	e.Shutdown()
	e2, err := StartEmbedded(EmbeddedOptions{Port: port, ClientNKey: e.creds.PublicKey, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e2.Shutdown)
	if s := recv(t, status, "the client reconnecting to the new server"); s != nats.CONNECTED {
		t.Fatalf("connection %v instead of reconnecting to the new server", s)
	}

	ctx := testCtx(t)
	if err := w.Refresh(ctx); err != nil {
		t.Fatalf("refresh after the server lost the bucket: %v", err)
	}
	if !alive(t, w, "w1") {
		t.Fatal("worker not alive after re-registering")
	}
	release, ok, err := locks.TryLock(ctx, "t", []byte("row"))
	if err != nil || !ok {
		t.Fatalf("row lock after the server lost the bucket: ok=%v err=%v", ok, err)
	}
	release()
}
