package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/runner"
	"github.com/trickle-dev/trickle/sicheck"
)

// nodeFlags are the flags of "sicheck node" and "sicheck client": where
// the deployment is and how its processes are tuned for a soak (short
// TTLs, so that kills and pauses show within seconds).
type nodeFlags struct {
	dir         string
	port        int
	id          string
	livenessTTL time.Duration
	lockTTL     time.Duration
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dir, "data", "", "the deployment's data directory")
	fs.IntVar(&f.port, "nats-port", 0, "the port of its embedded NATS server")
	fs.StringVar(&f.id, "worker-id", "", "this process's worker id")
	fs.DurationVar(&f.livenessTTL, "liveness-ttl", 2*time.Second, "liveness token TTL")
	fs.DurationVar(&f.lockTTL, "lock-ttl", 3*time.Second, "lock TTL")
}

func (f *nodeFlags) deployment(mode runner.Mode, log *slog.Logger) runner.Deployment {
	return runner.Deployment{Mode: mode, DataDir: f.dir, NATSPort: f.port, WorkerID: f.id,
		LivenessTTL: f.livenessTTL, LockTTL: f.lockTTL, Logger: log}
}

// processLogger logs warnings to stderr, where the orchestrator reads
// them (takeovers are warnings).
func processLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// runNode is "sicheck node": a runner of the deployment with no
// observers, which owns the data directory or joins its owner and takes
// it over when the owner dies, and collects garbage often.
func runNode(ctx context.Context, args []string, stderr io.Writer) int {
	var nf nodeFlags
	fs := flag.NewFlagSet("sicheck node", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nf.register(fs)
	gcEvery := fs.Duration("gc-interval", time.Second, "collection interval")
	gcLag := fs.Duration("gc-lag", 100*time.Millisecond, "collection lag")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// Info, so that the orchestrator counts the collections it logs.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := runner.Config{Deployment: nf.deployment(runner.ModeAuto, log),
		HTTPAddr: "off", GCInterval: *gcEvery, GCLag: *gcLag, Workers: 1, Scanners: 1}
	if err := runner.Run(ctx, cfg, framework.NewRegistry()); err != nil && ctx.Err() == nil {
		fmt.Fprintln(stderr, "sicheck node:", err)
		return 2
	}
	return 0
}

// runClient is "sicheck client": a process that runs list-append (or,
// with -bank, bank) transactions through the deployment's owner until
// SIGTERM, recording its history in -history as it goes, so that a kill
// -9 leaves what it did. With -final it reads every key used since
// -since once and exits.
func runClient(ctx context.Context, args []string, stderr io.Writer) int {
	var nf nodeFlags
	fs := flag.NewFlagSet("sicheck client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nf.register(fs)
	process := fs.Int("process", 0, "this client's number in the history")
	history := fs.String("history", "", "the file to record the history in")
	keys := fs.Int("keys", 8, "keys the clients share")
	rotate := fs.Duration("rotate-every", 0, "move to fresh keys this often")
	bank := fs.Bool("bank", false, "run the bank instead of list-append")
	final := fs.Bool("final", false, "read every key used since -since, once")
	since := fs.Int64("since", 0, "with -final: when the run began (Unix nanoseconds)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// SIGTERM stops the client between transactions; the context stays
	// alive for the transaction under way.
	var stop atomic.Bool
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() { <-sigs; stop.Store(true) }()
	log := processLogger(stderr)

	node, db, err := connect(ctx, nf, log)
	if err != nil {
		fmt.Fprintln(stderr, "sicheck client:", err)
		return 2
	}
	defer node.Close()
	if *bank {
		return runBankClient(ctx, db, *history, &stop, stderr)
	}
	f, err := os.OpenFile(*history, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(stderr, "sicheck client:", err)
		return 2
	}
	defer f.Close()
	rec := sicheck.NewRecorder(f)
	w, err := sicheck.NewListAppend(db, rec, &sicheck.ListAppendOptions{Process: *process, Keys: *keys, RotateEvery: *rotate})
	if err != nil {
		fmt.Fprintln(stderr, "sicheck client:", err)
		return 2
	}
	if *final {
		for attempt := 1; w.ReadSince(ctx, time.Unix(0, *since)) != sicheck.OK; attempt++ {
			if attempt == 20 || ctx.Err() != nil {
				fmt.Fprintln(stderr, "sicheck client: the final read did not commit:", w.Err())
				return 2
			}
			time.Sleep(100 * time.Millisecond) // the store may be between owners
		}
		return 0
	}
	for !stop.Load() && ctx.Err() == nil {
		if w.Step(ctx) != sicheck.OK {
			backOff(ctx)
		}
	}
	return 0
}

// runBankClient moves money until SIGTERM and writes the snapshots it
// found wrong to file, one a line, as it finds them, and its counts so
// far ("# ..." lines; the last one counts) now and then.
func runBankClient(ctx context.Context, db *framework.DB, file string, stop *atomic.Bool, stderr io.Writer) int {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(stderr, "sicheck client:", err)
		return 2
	}
	defer f.Close()
	b, err := sicheck.NewBank(db, nil)
	if err != nil {
		fmt.Fprintln(stderr, "sicheck client:", err)
		return 2
	}
	for !stop.Load() && ctx.Err() == nil && b.Open(ctx) != nil {
		backOff(ctx)
	}
	seen := 0
	for step := 1; !stop.Load() && ctx.Err() == nil; step++ {
		if b.Step(ctx) != nil {
			backOff(ctx)
		}
		if a := b.Anomalies(); len(a) > seen {
			for _, x := range a[seen:] {
				fmt.Fprintln(f, x.Detail)
			}
			seen = len(a)
		}
		if step%20 == 0 { // the counts so far, in case it is killed
			fmt.Fprintf(f, "# %d transfers, %d snapshots\n", b.Transfers, b.Reads)
		}
	}
	fmt.Fprintf(f, "# %d transfers, %d snapshots\n", b.Transfers, b.Reads)
	return 0
}

// connect joins the deployment as a client that writes (it registers a
// liveness token, so that collections respect its transactions and its
// locks are resolved once it is gone), retrying while no owner answers:
// the store may be between owners.
func connect(ctx context.Context, nf nodeFlags, log *slog.Logger) (*runner.Node, *framework.DB, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		node, err := runner.Open(ctx, nf.deployment(runner.ModeClient, log))
		if err == nil {
			db, err := node.OpenDB(ctx, framework.NewRegistry())
			if err == nil {
				return node, db, nil
			}
			node.Close()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, nil, fmt.Errorf("no runner to join at %s: %w", nf.dir, errors.Join(err, ctx.Err()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
