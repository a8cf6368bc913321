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

// eventually polls cond until it holds or within elapses. Expiry is enforced
// by the server's timers, so tests poll with a generous deadline instead of
// asserting timings.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
