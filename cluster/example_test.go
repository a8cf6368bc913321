package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/trickle-dev/trickle/cluster"
)

// A single-machine cluster: start NATS in-process, requiring the credentials
// kept in the data directory, then connect workers to it as to any external
// cluster.
func ExampleStartEmbedded() {
	// The data directory the processes of a deployment share
	// ("/var/lib/trickle"); the server and its clients find the same
	// credentials there, in a file only their user can read.
	dir, err := os.MkdirTemp("", "trickle-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	creds, err := cluster.LocalCredentials(dir)
	if err != nil {
		log.Fatal(err)
	}

	srv, err := cluster.StartEmbedded(cluster.EmbeddedOptions{
		ClientNKey: creds.PublicKey,
		Port:       -1, // a random port; leave unset for 4222
		// DataDir: "/var/lib/trickle/nats", to keep file-backed streams
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err := cluster.Connect(ctx, cluster.ConnectOptions{URLs: srv.ClientURL(), NKeySeedFile: creds.SeedFile})
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	fmt.Println("connected:", nc.IsConnected())

	_, err = cluster.Connect(ctx, cluster.ConnectOptions{URLs: srv.ClientURL()})
	fmt.Println("refused without credentials:", errors.Is(err, cluster.ErrAuthentication))
	// Output:
	// connected: true
	// refused without credentials: true
}

// exampleCluster starts an embedded server with credentials in a temporary
// directory and connects to it; stop undoes both.
func exampleCluster() (nc *nats.Conn, stop func()) {
	dir, err := os.MkdirTemp("", "trickle-example-")
	if err != nil {
		log.Fatal(err)
	}
	creds, err := cluster.LocalCredentials(dir)
	if err != nil {
		log.Fatal(err)
	}
	srv, err := cluster.StartEmbedded(cluster.EmbeddedOptions{ClientNKey: creds.PublicKey, Port: -1})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, err = cluster.Connect(ctx, cluster.ConnectOptions{URLs: srv.ClientURL(), NKeySeedFile: creds.SeedFile})
	if err != nil {
		log.Fatal(err)
	}
	return nc, func() {
		nc.Close()
		srv.Shutdown()
		os.RemoveAll(dir)
	}
}

// Two scanners reach the same row; only one runs the observer on it.
func ExampleRowLocks() {
	nc, stop := exampleCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}

	scannerA, err := cluster.NewRowLocks(ctx, js, "worker-a", cluster.RowLockOptions{})
	if err != nil {
		log.Fatal(err)
	}
	scannerB, err := cluster.NewRowLocks(ctx, js, "worker-b", cluster.RowLockOptions{})
	if err != nil {
		log.Fatal(err)
	}

	release, ok, err := scannerA.TryLock(ctx, "docs", []byte("row-17"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a locked:", ok)
	_, ok, _ = scannerB.TryLock(ctx, "docs", []byte("row-17"))
	fmt.Println("b locked:", ok)
	holder, _, _ := scannerB.Holder(ctx, "docs", []byte("row-17"))
	fmt.Println("holder:", holder)

	release() // after running the observer
	release, ok, _ = scannerB.TryLock(ctx, "docs", []byte("row-17"))
	fmt.Println("b locked after release:", ok)
	release()
	fmt.Printf("b stats: %+v\n", scannerB.Stats())
	// Output:
	// a locked: true
	// b locked: false
	// holder: worker-a
	// b locked after release: true
	// b stats: {Attempts:2 Acquired:1 Contended:1 Errors:0 Released:1 Lost:0}
}

// A worker registers itself so that other workers' lock resolvers know it is
// alive; its DB would use it as framework.Options.Liveness.
func ExampleNewLiveness() {
	nc, stop := exampleCluster()
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}

	// The refresher lives as long as this context: the worker's lifetime.
	live, err := cluster.NewLiveness(context.Background(), js, "worker-a", cluster.LivenessOptions{Info: "example"})
	if err != nil {
		log.Fatal(err)
	}
	alive, _ := live.Alive(ctx, "worker-a")
	fmt.Println("worker-a alive:", alive)
	alive, _ = live.Alive(ctx, "worker-gone")
	fmt.Println("worker-gone alive:", alive)

	if err := live.Close(); err != nil {
		log.Fatal(err)
	}
	alive, _ = live.Alive(ctx, "worker-a")
	fmt.Println("worker-a alive after Close:", alive)
	// Output:
	// worker-a alive: true
	// worker-gone alive: false
	// worker-a alive after Close: false
}
