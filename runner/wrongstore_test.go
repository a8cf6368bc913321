package runner_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/trickle-dev/trickle/runner"
	"github.com/trickle-dev/trickle/store"
)

// A client keeps naming the store it reached in every request: when
// another deployment's owner takes its place behind the same NATS, the
// client's requests are refused there instead of executed.
func TestClientNeverWritesIntoAnotherStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	defer ns.Shutdown()
	url := ns.ClientURL()
	owner := func(dir string) *runner.Node {
		n, err := runner.Open(ctx, runner.Deployment{Mode: runner.ModeOwner, DataDir: dir, NATSURL: url, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := owner(filepath.Join(t.TempDir(), "a"))
	client, err := runner.Open(ctx, runner.Deployment{NATSURL: url, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if client.Owner() || client.StoreID() != a.StoreID() {
		t.Fatalf("client of %s: owner %v, store %s", url, client.Owner(), client.StoreID())
	}
	txn := func() *store.RowTxn {
		return &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: store.Column{Family: "f", Qualifier: "q"}, Ts: 7, Value: []byte("v")}}}
	}
	if _, err := client.Store().Apply(ctx, txn()); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b := owner(filepath.Join(t.TempDir(), "b"))
	defer b.Close()
	if _, err := client.Store().Apply(ctx, txn()); !errors.Is(err, runner.ErrWrongStore) {
		t.Fatalf("Apply after another store took the subjects: %v, want ErrWrongStore", err)
	}
	if _, err := client.Oracle().Timestamp(ctx); !errors.Is(err, runner.ErrWrongStore) {
		t.Fatalf("timestamp from another store's oracle: %v, want ErrWrongStore", err)
	}
	if tables, err := b.Store().Tables(ctx, store.DefaultGroup); err != nil || len(tables) != 0 {
		t.Fatalf("the other store holds %v (%v)", tables, err)
	}
}
