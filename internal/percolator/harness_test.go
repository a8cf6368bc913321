package percolator

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/internal/enginetest"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

var (
	colA = Column{Family: "c", Qualifier: "a"}
	colB = Column{Family: "c", Qualifier: "b"}
)

// env is a store, an oracle on a test clock, and a liveness service shared
// by any number of DBs (workers), as several processes would share them.
type env struct {
	st store.Store
	// or is what DBs draw timestamps from: by default a coalescing client,
	// as a process remote from the oracle would use; srv is the server.
	or    Oracle
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

// newEnvOn returns an env on st: the pebble store of a test that needs
// its own, or a store on (mock) TiKV.
func newEnvOn(t testing.TB, st store.Store) *env {
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
func (e *env) db(t testing.TB, id string, tweak func(*Options)) *DB {
	t.Helper()
	o := &Options{WorkerID: id, Liveness: e.live, LockTTL: 10 * time.Second, Logger: quietLogger()}
	if tweak != nil {
		tweak(o)
	}
	return e.dbWith(t, e.st, o)
}

// dbOn opens a DB for worker id on st (a view of the env's store) and the
// env's oracle.
func (e *env) dbOn(t testing.TB, st store.Store, id string) *DB {
	t.Helper()
	return e.dbWith(t, st, &Options{WorkerID: id, Liveness: e.live, LockTTL: 10 * time.Second, Logger: quietLogger()})
}

func (e *env) dbWith(t testing.TB, st store.Store, o *Options) *DB {
	t.Helper()
	db, err := New(st, e.or, o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// observing is an observed set for the engine's tests: the given columns of
// table, of kind k.
func observing(k ObserverKind, table string, cols ...Column) ObservedSet {
	m := map[observedKey]ObserverKind{}
	for _, c := range cols {
		m[observedKey{table, c}] = k
	}
	return observedMap(m)
}

// observedKey keys observedMap.
type observedKey struct {
	table string
	col   Column
}

type observedMap map[observedKey]ObserverKind

func (m observedMap) ObservedKind(table string, col Column) (ObserverKind, bool) {
	k, ok := m[observedKey{table, col}]
	return k, ok
}

// crashAt is a tweak for env.db: the DB commits in two phases and its
// commits crash right after step, as if its process died there.
func crashAt(step CommitStep) func(*Options) {
	return func(o *Options) {
		o.DisableOnePhase = true // the faults are two-phase steps
		o.Faults = func(s CommitStep, _ uint64) error {
			if s == step {
				return errors.New("injected crash")
			}
			return nil
		}
	}
}
