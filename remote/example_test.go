package remote_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/remote"
	"github.com/trickle-dev/trickle/store"
)

// Example serves a store and an oracle from one process and uses them from
// another (here: another NATS connection).
func Example() {
	// An embedded NATS server on loopback; production uses a real one.
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		panic(err)
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		panic("nats not ready")
	}
	quiet := slog.New(slog.DiscardHandler)

	// The owning process: the store, the oracle and their services.
	owner, err := nats.Connect(ns.ClientURL())
	if err != nil {
		panic(err)
	}
	defer owner.Close()
	db, err := store.Open("db", &store.Options{FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	storeSvc, err := remote.ServeStore(owner, db, &remote.ServiceOptions{Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer storeSvc.Stop()
	tso, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer tso.Close()
	oracleSvc, err := remote.ServeOracle(owner, tso, &remote.ServiceOptions{Logger: quiet})
	if err != nil {
		panic(err)
	}
	defer oracleSvc.Stop()

	// Another process: clients with the same interfaces as the local ones.
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	st, err := remote.NewStore(nc, nil)
	if err != nil {
		panic(err)
	}
	defer st.Close()
	oc, err := remote.NewOracle(nc, nil)
	if err != nil {
		panic(err)
	}
	clock, err := oracle.NewClient(oc, nil) // coalesces this process's callers
	if err != nil {
		panic(err)
	}
	defer clock.Close()

	ctx := context.Background()
	ts, err := clock.Timestamp(ctx)
	if err != nil {
		panic(err)
	}
	balance := store.Column{Family: "f", Qualifier: "balance"}
	res, err := st.Apply(ctx, &store.RowTxn{Table: "accounts", Row: []byte("alice"),
		Mutations: []store.Mutation{{Column: balance, Ts: ts, Value: []byte("100")}}})
	if err != nil {
		panic(err)
	}
	cells, err := st.ReadRow(ctx, "accounts", []byte("alice"), []store.Column{balance}, nil)
	if err != nil {
		panic(err)
	}
	// Several rows in one round trip, results in request order.
	rows, err := st.ReadRows(ctx, []store.RowRead{
		{Table: "accounts", Row: []byte("bob"), Columns: []store.Column{balance}},
		{Table: "accounts", Row: []byte("alice"), Columns: []store.Column{balance}},
	})
	if err != nil {
		panic(err)
	}
	issued, current, err := oc.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Applied, string(cells[0].Value), cells[0].Ts == ts)
	fmt.Println(len(rows[0]), string(rows[1][0].Value))
	fmt.Println(issued, current == ts)
	// Output:
	// true 100 true
	// 0 100
	// 1 true
}
