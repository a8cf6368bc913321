// Command sicheck runs transactions against the framework's stores while
// it crashes, kills and pauses their processes, records what every
// transaction read and wrote, and checks that the history could have run
// under snapshot isolation (package sicheck). It is the soak to run after
// changing the transaction engine:
//
//	go run ./cmd/sicheck                                 # in process, 30s
//	go run ./cmd/sicheck -mode processes -duration 10m   # runners and clients as processes, kill -9
//	go run ./cmd/sicheck -mode tikv -regions 4           # on client-go's mock TiKV
//	go run ./cmd/sicheck -mode tikv-native -regions 4    # TiKV's own transactions, on the mock
//	go run ./cmd/sicheck check history-*.jsonl           # check recorded histories
//
// Modes:
//
//   - inprocess: clients (half committing in one phase, half in two)
//     crash at injected commit steps; the owner's store is killed and
//     reopened from what its disk kept; clients pause past their liveness
//     while a collection passes them.
//   - tikv: the same on a mock TiKV cluster (no owner to kill).
//   - tikv-native: the engine whose transactions are TiKV's own
//     (internal/tikvengine) on a mock TiKV cluster, each client process
//     with a TiKV client of its own: two thirds with a lease (so
//     committing in two phases), a third without one, as a loader writes,
//     committing asynchronously or in one phase, as the mock cluster
//     serves them (tikvtest), crashes between async commit's requests
//     included; the lease-less ones are not paused. A client
//     dies at a prewrite or commit request, before it is sent or after
//     (its answer lost), leaving its locks (of a 200ms TTL rather than
//     client-go's 3s) to the others' lock resolvers; clients freeze at a
//     read, their requests held, while their lease is dropped and
//     collections pass them. As the mock drops no version, reads answered
//     below a collection's safe point are tracked, and a transaction that
//     used one is an anomaly.
//   - processes: two runner processes on one data directory (the owner
//     serves the store over NATS, the other joined it) and client
//     processes; the owner, the clients and the runners are killed with
//     SIGKILL and restarted, a joined runner takes the store over, and
//     clients are stopped with SIGSTOP past their liveness TTL.
//
// It prints the figures (transactions, faults, anomalies) and exits 0 if
// the history is valid, 1 if an anomaly was found, 2 on an error.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/trickle-dev/trickle/sicheck"
)

// Modes.
const (
	modeInProcess = "inprocess"
	modeTiKV      = "tikv"
	// modeTiKVNative runs the engine whose transactions are TiKV's own.
	modeTiKVNative = "tikv-native"
	modeProcesses  = "processes"
)

// Config describes a run.
type Config struct {
	Mode string
	// Regions splits the TiKV cluster (tikv modes).
	Regions int
	// Clients and BankClients are how many list-append and bank clients
	// run at once.
	Clients, BankClients int
	Duration             time.Duration
	Keys                 int
	RotateEvery          time.Duration
	// CrashOneIn makes a commit step crash one time in this many (0:
	// never).
	CrashOneIn int
	// OwnerCrashEvery, PauseEvery, KillEvery and GCEvery space the faults
	// and the collections (0: none).
	OwnerCrashEvery, PauseEvery, KillEvery, GCEvery time.Duration
	// GCLag keeps versions this much younger than now.
	GCLag time.Duration
	// MinFaults keeps a run going past Duration until each fault it
	// injects happened at least this many times (at most ten times
	// Duration in all), so that a slow machine still tests them all.
	MinFaults int
	// Dir holds the processes mode's data and histories ("": a temporary
	// directory, removed after a valid run).
	Dir    string
	Logger *slog.Logger
	// staleReads breaks the clients' store (see staleReads): the check's
	// own test shows that it catches a broken engine.
	staleReads bool
	// noLease breaks tikv-native's clients (see native.noLease): the
	// check's own test shows that it catches reads below a collection's
	// safe point.
	noLease bool
}

func defaults() Config {
	return Config{
		Mode: modeInProcess, Regions: 1, Clients: 6, BankClients: 2, Duration: 30 * time.Second, Keys: 8,
		CrashOneIn: 40, OwnerCrashEvery: 2 * time.Second, PauseEvery: 1500 * time.Millisecond,
		KillEvery: 3 * time.Second, GCEvery: 500 * time.Millisecond, GCLag: 20 * time.Millisecond, RotateEvery: 500 * time.Millisecond,
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command with args and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return checkFiles(args[1:], stdout, stderr)
		case "node":
			return runNode(ctx, args[1:], stderr)
		case "client":
			return runClient(ctx, args[1:], stderr)
		}
	}
	cfg := defaults()
	fs := flag.NewFlagSet("sicheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Mode, "mode", cfg.Mode, "inprocess, tikv, tikv-native or processes")
	fs.IntVar(&cfg.Regions, "regions", cfg.Regions, "regions of the mock TiKV cluster (tikv modes)")
	fs.IntVar(&cfg.Clients, "clients", cfg.Clients, "list-append clients")
	fs.IntVar(&cfg.BankClients, "bank-clients", cfg.BankClients, "bank clients")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long the workloads run under faults")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "keys the list-append clients share (fewer: more conflicts)")
	fs.DurationVar(&cfg.RotateEvery, "rotate-every", cfg.RotateEvery, "move to fresh keys this often (0: never), so lists stay short in long soaks")
	fs.IntVar(&cfg.CrashOneIn, "crash-one-in", cfg.CrashOneIn, "a commit step crashes its client one time in this many (0: never; in process and tikv modes)")
	fs.DurationVar(&cfg.OwnerCrashEvery, "owner-crash-every", cfg.OwnerCrashEvery, "kill the store's owner this often (0: never)")
	fs.DurationVar(&cfg.PauseEvery, "pause-every", cfg.PauseEvery, "pause a client past its liveness this often (0: never)")
	fs.DurationVar(&cfg.KillEvery, "kill-every", cfg.KillEvery, "kill a client process with SIGKILL this often (processes mode; 0: never)")
	fs.DurationVar(&cfg.GCEvery, "gc-every", cfg.GCEvery, "collect this often (in process and tikv modes; the runners' -gc-interval in processes mode)")
	fs.DurationVar(&cfg.GCLag, "gc-lag", cfg.GCLag, "keep versions this much younger than now")
	fs.IntVar(&cfg.MinFaults, "min-faults", cfg.MinFaults, "run past -duration until each fault happened this many times (at most 10 × -duration)")
	fs.StringVar(&cfg.Dir, "dir", "", "where the processes mode keeps its data and histories (default: a temporary directory)")
	verbose := fs.Bool("v", false, "log what the harness does")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run (the check included) to this file")
	memProfile := fs.String("memprofile", "", "write a heap profile to this file when the run ends")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sicheck: unexpected argument %q (commands: check)\n", fs.Arg(0))
		return 2
	}
	if cfg.Mode == modeProcesses {
		// Processes take seconds to die, take over and start: space
		// the faults unless told otherwise.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["owner-crash-every"] {
			cfg.OwnerCrashEvery = 8 * time.Second
		}
		if !set["pause-every"] {
			cfg.PauseEvery = 7 * time.Second
		}
		if !set["gc-every"] {
			cfg.GCEvery = time.Second
		}
		if !set["gc-lag"] {
			cfg.GCLag = 100 * time.Millisecond
		}
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if err := cfg.validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "sicheck:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "sicheck:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Fprintf(stdout, "sicheck: %s for %v: %d list-append and %d bank clients on %d keys\n", cfg.Mode, cfg.Duration, cfg.Clients, cfg.BankClients, cfg.Keys)
	res, err := soak(ctx, cfg)
	if *memProfile != "" {
		if f, ferr := os.Create(*memProfile); ferr == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	fmt.Fprint(stdout, res)
	if !res.Report.Valid() {
		return 1
	}
	return 0
}

// validate reports the first unusable setting.
func (c *Config) validate() error {
	switch {
	case c.Mode != modeInProcess && c.Mode != modeTiKV && c.Mode != modeTiKVNative && c.Mode != modeProcesses:
		return fmt.Errorf("sicheck: -mode %q: want inprocess, tikv, tikv-native or processes", c.Mode)
	case c.Clients < 1:
		return fmt.Errorf("sicheck: -clients %d: want at least 1", c.Clients)
	case c.BankClients < 0:
		return fmt.Errorf("sicheck: -bank-clients %d is negative", c.BankClients)
	case c.Keys < 1:
		return fmt.Errorf("sicheck: -keys %d: want at least 1", c.Keys)
	case c.Regions < 1:
		return fmt.Errorf("sicheck: -regions %d: want at least 1", c.Regions)
	case c.Duration <= 0:
		return fmt.Errorf("sicheck: -duration %v: want more than 0", c.Duration)
	case c.CrashOneIn < 0:
		return fmt.Errorf("sicheck: -crash-one-in %d is negative", c.CrashOneIn)
	case c.GCLag < 0:
		return fmt.Errorf("sicheck: -gc-lag %v is negative", c.GCLag)
	case c.MinFaults < 0:
		return fmt.Errorf("sicheck: -min-faults %d is negative", c.MinFaults)
	}
	return nil
}

// soak runs cfg's mode and checks what it recorded.
func soak(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Mode == modeProcesses {
		return runProcesses(ctx, cfg)
	}
	w, err := newWorld(cfg)
	if err != nil {
		return nil, err
	}
	defer w.close()
	return w.run(ctx)
}

// checkFiles checks recorded histories, read together.
func checkFiles(files []string, stdout, stderr io.Writer) int {
	if len(files) == 0 {
		fmt.Fprintln(stderr, "sicheck check: name the history files")
		return 2
	}
	h, err := readHistories(files)
	if err != nil {
		fmt.Fprintln(stderr, "sicheck check:", err)
		return 2
	}
	r := sicheck.Check(h)
	fmt.Fprintln(stdout, r)
	if !r.Valid() {
		return 1
	}
	return 0
}

// readHistories reads the histories of files, one client's each (or
// several clients'), into one.
func readHistories(files []string) (sicheck.History, error) {
	var all sicheck.History
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		h, err := sicheck.ReadHistory(fh)
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		all = append(all, h...)
	}
	return all, nil
}
