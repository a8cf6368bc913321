package remote

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

var bg = context.Background()

var quiet = slog.New(slog.DiscardHandler)

// hangGuard bounds a wait that ends only if the code under test works: a
// safety net that turns a hang into a failure naming what hung, far above
// the time any awaited operation takes even on a loaded machine. Tests
// assert what happened, never how long it took.
const hangGuard = 30 * time.Second

// await runs f on a goroutine of its own and returns its error; if f has
// not returned within hangGuard, the test fails naming what hangs.
func await(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("%s: still running after %v: it hangs", what, hangGuard)
		return nil
	}
}

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

// startNATS runs an embedded NATS server on a random loopback port for the
// duration of the test, with the default max payload (1 MiB).
func startNATS(t testing.TB) *natsserver.Server {
	t.Helper()
	return startNATSMaxPayload(t, 0)
}

// startNATSMaxPayload runs an embedded NATS server whose max payload is
// maxPayload bytes (0: the default).
func startNATSMaxPayload(t testing.TB, maxPayload int32) *natsserver.Server {
	t.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

// connect opens a client connection to ns, closed at the end of the test.
func connect(t testing.TB, ns *natsserver.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL(), nats.MaxReconnects(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// The tests' second locality group: a family the store keeps apart.
const (
	sideFamily = "side"
	sideGroup  = "side"
)

// openMem opens an in-memory store closed at the end of the test.
func openMem(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Logger: quiet, Durability: store.DurabilityNone, Groups: map[string]string{sideFamily: sideGroup}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// storeEnv is a store served over an embedded NATS server and a client
// reaching it through its own connection.
type storeEnv struct {
	ns     *natsserver.Server
	db     *store.DB
	svc    *StoreService
	client *StoreClient
}

// newStoreEnv serves a fresh store with svc (nil: defaults; the logger is
// always quiet) and connects a client with cl (nil: defaults).
func newStoreEnv(t testing.TB, svc *ServiceOptions, cl *ClientOptions) *storeEnv {
	t.Helper()
	return newStoreEnvOn(t, startNATS(t), svc, cl)
}

// newStoreEnvOn is newStoreEnv on a given NATS server.
func newStoreEnvOn(t testing.TB, ns *natsserver.Server, svcOpts *ServiceOptions, cl *ClientOptions) *storeEnv {
	t.Helper()
	db := openMem(t)
	svc, _, c := serveClient(t, ns, db, svcOpts, cl)
	return &storeEnv{ns: ns, db: db, svc: svc, client: c}
}

// serveClient serves st on ns (a quiet service) and returns the service,
// the client's connection and a client of it, all stopped at the end of
// the test.
func serveClient(t testing.TB, ns *natsserver.Server, st store.Store, svcOpts *ServiceOptions, cl *ClientOptions) (*StoreService, *nats.Conn, *StoreClient) {
	t.Helper()
	svc, err := ServeStore(connect(t, ns), st, quietService(svcOpts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	nc := connect(t, ns)
	c, err := NewStore(nc, cl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return svc, nc, c
}

// quietService returns a copy of o (nil: defaults) that logs nothing.
func quietService(o *ServiceOptions) *ServiceOptions {
	var q ServiceOptions
	if o != nil {
		q = *o
	}
	q.Logger = quiet
	return &q
}

// slowService and slowClient give the tests of multi-megabyte messages
// time enough under the race detector on a loaded machine, where copying a
// buffer costs far more than the network: they check correctness, not
// speed.
func slowService() *ServiceOptions { return &ServiceOptions{HandlerTimeout: 5 * time.Minute} }

func slowClient() *ClientOptions { return &ClientOptions{RequestTimeout: 5 * time.Minute} }

// countingOracle adds the Issued counter an OracleBackend needs to a
// Server.
type countingOracle struct {
	*oracle.Server
	issued atomic.Uint64
}

func (c *countingOracle) Reserve(ctx context.Context, n int) (uint64, error) {
	first, err := c.Server.Reserve(ctx, n)
	if err == nil {
		c.issued.Add(uint64(n))
	}
	return first, err
}

func (c *countingOracle) Issued() uint64 { return c.issued.Load() }

func newCountingOracle(t testing.TB) *countingOracle {
	t.Helper()
	s, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &countingOracle{Server: s}
}

func col(f, q string) store.Column { return store.Column{Family: f, Qualifier: q} }
