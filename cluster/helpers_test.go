package cluster

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// quietLogger shows warnings and errors only. It writes to stderr rather than
// t.Log, which must not be called after a test ends.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// slogTo logs at Info and above to w.
func slogTo(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil))
}

// testServer is an embedded server with the credentials its clients need.
type testServer struct {
	*Embedded
	creds Credentials
}

// clientOptions are the options of a client of s that authenticates.
func (s *testServer) clientOptions() ConnectOptions {
	return ConnectOptions{URLs: s.ClientURL(), NKeySeedFile: s.creds.SeedFile, Logger: quietLogger()}
}

// startServerWith starts an embedded server requiring the credentials of a
// fresh temporary directory, on a random port unless o sets one; it is shut
// down when the test ends.
func startServerWith(t *testing.T, o EmbeddedOptions) (*testServer, error) {
	t.Helper()
	creds, err := LocalCredentials(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o.ClientNKey = creds.PublicKey
	if o.Port == 0 {
		o.Port = -1
	}
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	e, err := StartEmbedded(o)
	if err != nil {
		return nil, err
	}
	t.Cleanup(e.Shutdown)
	return &testServer{e, creds}, nil
}

// startServer starts an embedded server on a random loopback port, requiring
// credentials, shut down when the test ends.
func startServer(t *testing.T) *testServer {
	t.Helper()
	s, err := startServerWith(t, EmbeddedOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// connectJS connects to s with its credentials, closing the connection when
// the test ends.
func connectJS(t *testing.T, s *testServer) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nc, err := Connect(ctx, s.clientOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// newJS starts a server and returns a JetStream client of it.
func newJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	_, js := connectJS(t, startServer(t))
	return js
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// hangGuard bounds a wait that ends only if the code under test works: a
// safety net that turns a hang into a failure naming what never happened,
// far above the time any awaited event takes even on a loaded machine
// (reconnect backoff and key expiry included). Tests assert what happened,
// never how long it took.
const hangGuard = 30 * time.Second

// recv receives from ch; if nothing comes within hangGuard, the test fails
// saying that what never happened.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(hangGuard):
		t.Fatalf("%s: not within %v", what, hangGuard)
		var zero T
		return zero
	}
}

// keyWatch follows the writes to one key of a bucket. The server reports
// every write, its own expiry markers included, so tests wait for a key
// to change or expire on these events rather than sleeping or polling.
type keyWatch struct {
	t *testing.T
	w jetstream.KeyWatcher
}

// watchKey watches key in kv until the test ends: first its current value
// (if any), then nil, then every later write, unless opts say otherwise.
func watchKey(t *testing.T, kv jetstream.KeyValue, key string, opts ...jetstream.WatchOpt) *keyWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := kv.Watch(ctx, key, opts...)
	if err != nil {
		cancel()
		t.Fatalf("watch %s: %v", key, err)
	}
	t.Cleanup(func() { _ = w.Stop(); cancel() })
	return &keyWatch{t: t, w: w}
}

// next returns the next entry (nil marks the end of the current values),
// failing the test with what was awaited if none comes within hangGuard.
func (k *keyWatch) next(what string) jetstream.KeyValueEntry {
	k.t.Helper()
	select {
	case e, ok := <-k.w.Updates():
		if !ok {
			k.t.Fatalf("%s: the watch ended", what)
		}
		return e
	case <-time.After(hangGuard):
		k.t.Fatalf("%s: not within %v", what, hangGuard)
	}
	return nil
}

// awaitGone waits until key has no value in kv, and returns the entry
// that removed it: the server's marker when the key expired or was purged.
// It returns nil if the key was already gone, marker and all, when the
// watch started.
func awaitGone(t *testing.T, kv jetstream.KeyValue, key, what string) jetstream.KeyValueEntry {
	t.Helper()
	w := watchKey(t, kv, key)
	present := false
	for {
		e := w.next(what)
		switch {
		case e == nil: // the current value, if any, was delivered
			if !present {
				return nil
			}
		case e.Operation() == jetstream.KeyValuePut:
			present = true
		default:
			return e
		}
	}
}
