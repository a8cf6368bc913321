// Package remotetest serves a store over an embedded NATS server, for the
// tests and benchmarks of code that must behave the same on a store in
// another process: transactions whose snapshot the store service chooses,
// observers run by a process that does not own the store.
package remotetest

import (
	"io"
	"log/slog"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/remote"
	"github.com/trickle-dev/trickle/store"
)

// Deployment is a store served the way a deployment serves it: one
// connection serves it (the owner's), another calls it (a runner's), and
// other services of the deployment may share them.
type Deployment struct {
	Store         *remote.StoreClient // the served store, called through Calls
	Serves, Calls *nats.Conn
}

// Serve serves st over a new embedded NATS server on loopback TCP. With or
// (not nil) the store service draws reads' timestamps from it, as an
// owner's does from its oracle (remote.ServiceOptions.Oracle): or must be
// the oracle the callers draw from. Everything is stopped when tb ends;
// st is not closed.
func Serve(tb testing.TB, st store.Store, or oracle.Reserver) Deployment {
	tb.Helper()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		tb.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		tb.Fatal("remotetest: the NATS server is not ready after 10s")
	}
	tb.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	dial := func() *nats.Conn {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(nc.Close)
		return nc
	}
	d := Deployment{Serves: dial(), Calls: dial()}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := remote.ServeStore(d.Serves, st, &remote.ServiceOptions{Logger: quiet, Oracle: or})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { svc.Stop() })
	if d.Store, err = remote.NewStore(d.Calls, nil); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Store.Close() })
	return d
}
