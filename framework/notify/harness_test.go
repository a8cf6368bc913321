package notify

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/enginetest"
	"github.com/trickle-dev/trickle/internal/percolator"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

// env is a store, an oracle on a test clock, and a liveness service shared
// by any number of DBs (workers), as several processes would share them.
type env struct {
	st *store.DB
	// dbStore, if set, is the store DBs run on instead of st: st served
	// over NATS (see served).
	dbStore store.Store
	// or is what DBs draw timestamps from: by default a coalescing client,
	// as a process remote from the oracle would use; srv is the server.
	or    percolator.Oracle
	srv   *oracle.Server
	clock *enginetest.Clock
	live  *enginetest.Liveness
}

func newEnv(t testing.TB) *env {
	t.Helper()
	st, err := store.Open("", protocol.StoreOptions(&store.Options{FS: vfs.NewMem(), Logger: quietLogger()}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newEnvOn(t, st)
}

func newEnvOn(t testing.TB, st *store.DB) *env {
	t.Helper()
	clock := &enginetest.Clock{}
	srv, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Clock: clock.Now, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := oracle.NewClient(srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); srv.Close() })
	return &env{st: st, or: cl, srv: srv, clock: clock, live: &enginetest.Liveness{}}
}

// db opens a DB for worker id on the shared store and oracle.
func (e *env) db(t testing.TB, id string, tweak func(*percolator.Options)) *percolator.DB {
	t.Helper()
	o := &percolator.Options{WorkerID: id, Liveness: e.live, LockTTL: 10 * time.Second, Logger: quietLogger()}
	if tweak != nil {
		tweak(o)
	}
	var st store.Store = e.st
	if e.dbStore != nil {
		st = e.dbStore
	}
	db, err := percolator.New(st, e.or, o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// observedBy is reg as the engine's observed set, for DBs the tests open
// on the engine itself to reach its test knobs.
func observedBy(reg *framework.Registry) percolator.ObservedSet { return registrySet{reg} }

type registrySet struct{ reg *framework.Registry }

func (s registrySet) ObservedKind(table string, col Column) (percolator.ObserverKind, bool) {
	o, ok := s.reg.Lookup(table, col)
	return percolator.ObserverKind(o.Kind), ok
}

// frontDB is db as the front holds it.
func frontDB(db *percolator.DB) *framework.DB { return (*framework.DB)(engine.NewDB(db)) }
