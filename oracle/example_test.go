package oracle_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/trickle-dev/trickle/oracle"
)

func ExampleServer() {
	// A fixed clock keeps the output stable; production uses time.Now.
	clock := func() time.Time { return time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC) }
	s, err := oracle.NewServer(oracle.NewMemPersister(0),
		&oracle.ServerOptions{Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer s.Close()

	ctx := context.Background()
	for range 2 {
		ts, err := s.Reserve(ctx, 1)
		if err != nil {
			panic(err)
		}
		fmt.Println(oracle.Physical(ts).UTC().Format(time.RFC3339Nano), ts&(1<<oracle.LogicalBits-1))
	}
	// Output:
	// 2024-01-02T03:04:05.006Z 0
	// 2024-01-02T03:04:05.006Z 1
}

func ExampleClient() {
	// The Reserver is often a stub for a remote oracle; here it is an
	// in-process Server. Production code would use a FilePersister.
	srv, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	c, err := oracle.NewClient(srv, &oracle.ClientOptions{MaxBatch: 1024})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	ctx := context.Background()
	start, err := c.Timestamp(ctx) // a transaction's start timestamp
	if err != nil {
		panic(err)
	}
	commit, err := c.Timestamp(ctx) // and later its commit timestamp
	if err != nil {
		panic(err)
	}
	fmt.Println(commit > start)
	st := c.Stats()
	fmt.Println(st.Batches, st.Timestamps)
	// Output:
	// true
	// 2 2
}
