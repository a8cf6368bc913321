// Command webindex-consumer is an external consumer of the web index's
// export (runner -export jetstream): it reads the compacted JetStream
// stream the runner publishes the canonical table to — the last message
// of each URL's subject, then, with -follow, every change as it comes —
// keeps per URL the entry with the highest sequence number (the contract
// of package framework/export), and prints the table it rebuilt as JSON
// lines sorted by URL: what a search cluster or a warehouse loading the
// stream would hold.
//
//	webindex-consumer -data ./data            the runner owning ./data on this machine
//	webindex-consumer -nats nats://host:4222  any deployment (credentials: TRICKLE_NATS_*)
//	webindex-consumer -follow                 then print each change as it comes, until interrupted
//
// It exits 1 if the stream cannot be read, naming what was unreachable.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/runner"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "webindex-consumer:", err)
		os.Exit(1)
	}
}

// run is the command: the table goes to out as JSON lines, what it read
// to errOut.
func run(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("webindex-consumer", flag.ContinueOnError)
	fs.SetOutput(errOut)
	dataDir := fs.String("data", "data", "data directory of a runner on this machine (its NATS server and key)")
	natsURL := fs.String("nats", "", "NATS URL of the deployment (instead of -data); credentials from TRICKLE_NATS_*")
	natsPort := fs.Int("nats-port", 0, "with -data: the embedded NATS port (default: where the runner announced it)")
	stream := fs.String("stream", "TRICKLE_EXPORT", "the runner's -export-stream")
	subject := fs.String("subject", "trickle.export", "the runner's -export-subject")
	follow := fs.Bool("follow", false, "after the table, print each change as it comes, until interrupted")
	timeout := fs.Duration("connect-timeout", 10*time.Second, "how long to try reaching NATS")
	if err := fs.Parse(args); err != nil {
		return err
	}
	creds, err := cluster.ConnectOptionsFromEnv()
	if err != nil {
		return err
	}
	dep := runner.Deployment{Mode: runner.ModeClient, DataDir: *dataDir, NATSURL: *natsURL, NATSPort: *natsPort, NATS: creds,
		ConnectTimeout: *timeout, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	node, err := runner.Open(ctx, dep)
	if err != nil {
		return err
	}
	defer node.Close()
	opts := export.ConsumeOptions{Stream: *stream, Subject: *subject, Queue: "webindex", Follow: *follow}
	table := export.NewTable()
	enc := json.NewEncoder(out)
	var caughtUp bool
	var printErr error
	read := 0
	printTable := func() {
		caughtUp = true
		rows := table.Values()
		for _, u := range slices.Sorted(maps.Keys(rows)) {
			row, _, err := schema.DecodeExported(export.Entry{Key: []byte(u), Value: rows[u]})
			if err == nil {
				err = enc.Encode(row)
			}
			if err != nil {
				printErr = err
				return
			}
		}
		fmt.Fprintf(errOut, "%d pages from %d messages of stream %s\n", len(rows), read, *stream)
	}
	opts.CaughtUp = printTable
	_, err = export.Consume(ctx, node.Conn(), opts, func(_ string, e export.Entry) error {
		if printErr != nil {
			return printErr
		}
		row, deleted, err := schema.DecodeExported(e)
		if err != nil {
			return err
		}
		read++
		if !table.Apply(e) || !caughtUp {
			return nil // part of the table, or older than what it holds
		}
		// Once the table is out, each change: a page's new row, or
		// {"url": …, "deleted": true}.
		if deleted {
			return enc.Encode(struct {
				URL     string `json:"url"`
				Deleted bool   `json:"deleted"`
			}{row.URL, true})
		}
		return enc.Encode(row)
	})
	if err != nil {
		return err
	}
	if !*follow {
		printTable()
	}
	return printErr
}
