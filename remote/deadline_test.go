package remote

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/store"
)

// A request the NATS client buffered while it was reconnecting reaches a
// service only once the connection is back: after a takeover, the new
// owner's, long after the caller gave up and reported the outcome
// unknown (and stopped reporting its transaction to the collector). The
// service must not run it: requests carry their absolute deadline, and an
// expired one is refused unexecuted.
func TestARequestBufferedAcrossAReconnectDoesNotRunLate(t *testing.T) {
	ctx := context.Background()
	opts := &natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
	old, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go old.Start()
	if !old.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	port := old.Addr().(*net.TCPAddr).Port
	nc, err := nats.Connect(old.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	client, err := NewStore(nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	old.Shutdown() // the owner dies
	old.WaitForShutdown()
	write := func(row string) *store.RowTxn {
		return &store.RowTxn{Table: "t", Row: []byte(row), Mutations: []store.Mutation{{Column: col("f", "q"), Value: []byte("v")}}}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = client.Apply(short, write("late"))
	cancel()
	if err == nil {
		t.Fatal("an Apply succeeded with no server")
	}

	// A new owner serves the store on the same address; the connection
	// comes back and sends what it buffered.
	opts.Port = port
	takeover, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go takeover.Start()
	if !takeover.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	defer takeover.Shutdown()
	db := openMem(t)
	svc, err := ServeStore(connect(t, takeover), db, quietService(&ServiceOptions{StoreConcurrency: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	// Requests of one endpoint run one after another, in the order they
	// were sent (StoreConcurrency 1): once this one is answered, the
	// buffered one was handled.
	for {
		_, err := client.Apply(ctx, write("now"))
		if err == nil {
			break
		}
		if !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
	}
	if cells, err := db.ReadRow(ctx, "t", []byte("late"), []store.Column{col("f", "q")}, nil); err != nil || len(cells) != 0 {
		t.Fatalf("the request buffered across the reconnect ran after its caller gave up: %v %v", cells, err)
	}
}
