// Command runner runs the registered pipelines' observers.
//
//	runner                 run workers (owning ./data, or joining its owner)
//	runner demo            run the pipelines on their built-in sample input, report, keep serving
//	runner wait            return when the pipelines are idle
//	runner status          workers alive, pending and failing notifications, oracle position
//	runner scan TABLE      print a table's raw cells with lock/write/ack/notify metadata
//
// Every flag has an environment variable; see -help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/examples/wordcount"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/ui"
	"github.com/trickle-dev/trickle/runner"
	"github.com/trickle-dev/trickle/telemetry"
)

// pipeline is one application this binary runs: its observers, and for the
// demo a built-in sample input and a report that checks the result.
type pipeline struct {
	name     string
	register func(*framework.Registry) error
	// serve, if set, mounts the pipeline's HTTP endpoints on the runner.
	serve func(mux *http.ServeMux, db *framework.DB, log *slog.Logger)
	// demo loads the sample input and returns a function that reports on
	// (and verifies) the result once the pipeline is idle.
	demo func(ctx context.Context, r *runner.Runner) (report func(context.Context, io.Writer) error, err error)
}

// pipelines lists what this binary runs. To run your own observers, build
// your own binary the same way (see examples/custom-runner).
var pipelines = []pipeline{
	{
		name:     "webindex",
		register: webIndex.Register,
		serve: func(mux *http.ServeMux, db *framework.DB, log *slog.Logger) {
			mux.Handle("/api/", webIndex.Handler(db, log))
			mux.Handle("/", ui.Handler())
		},
		demo: webindexDemo,
	},
	{
		name:     "wordcount",
		register: wordcount.Register,
		demo: func(ctx context.Context, r *runner.Runner) (func(context.Context, io.Writer) error, error) {
			docs, err := wordcount.Sample(ctx, r.DB, sampleSize)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, w io.Writer) error { return wordcount.Verify(ctx, r.DB, docs, w) }, nil
		},
	},
}

// webIndex is the web index the runner serves, with default options.
var webIndex = func() *webindex.Index {
	ix, err := webindex.New(nil)
	if err != nil {
		panic(err)
	}
	return ix
}()

// startPipelines starts a runner for every pipeline and mounts their endpoints.
func startPipelines(ctx context.Context, cfg runner.Config) (*runner.Runner, error) {
	reg, err := registry()
	if err != nil {
		return nil, err
	}
	r, err := runner.Start(ctx, cfg, reg)
	if err != nil {
		return nil, err
	}
	for _, p := range pipelines {
		if p.serve != nil {
			p.serve(r.Mux, r.DB, cfg.Logger)
		}
	}
	return r, nil
}

func registry() (*framework.Registry, error) {
	reg := framework.NewRegistry()
	for _, p := range pipelines {
		if err := p.register(reg); err != nil {
			return nil, fmt.Errorf("pipeline %s: %w", p.name, err)
		}
	}
	return reg, nil
}

// demo runs a runner, feeds every pipeline its sample input, waits until
// the pipelines are idle, reports, and keeps running until interrupted.
func demo(ctx context.Context, cfg runner.Config, once bool) error {
	r, err := startPipelines(ctx, cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	began := time.Now()
	var reports []func(context.Context, io.Writer) error
	for _, p := range pipelines {
		if p.demo == nil {
			continue
		}
		fmt.Printf("loading the %s sample...\n", p.name)
		report, err := p.demo(ctx, r)
		if err != nil {
			return err
		}
		reports = append(reports, report)
	}
	fmt.Println("waiting for the observers to finish...")
	stuck, err := runner.Wait(ctx, r.Node, runner.WaitOptions{})
	if err != nil {
		return err
	}
	s := r.Scanner.Stats()
	fmt.Printf("idle after %v: %d observer transactions, %d notifications with nothing new, %d failures, %d conflicts retried\n",
		time.Since(began).Round(time.Millisecond), s.Ran.Load(), s.Skipped.Load(), s.Failed.Load(), r.DB.Stats().Conflicts.Load())
	if len(stuck) > 0 {
		return fmt.Errorf("%d notifications are stuck", len(stuck))
	}
	for _, report := range reports {
		if err := report(ctx, os.Stdout); err != nil {
			return err
		}
	}
	if once {
		return nil
	}
	fmt.Println("still running (Ctrl-C to stop); try: go run ./cmd/runner status")
	<-ctx.Done()
	stop()
	return <-done
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(env(name, "")); err == nil {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(env(name, "")); err == nil {
		return v
	}
	return def
}

// flags binds the configuration shared by every subcommand.
func flags(fs *flag.FlagSet, cfg *runner.Config, logJSON *bool, logLevel *string) {
	fs.StringVar((*string)(&cfg.Mode), "mode", env("TRICKLE_MODE", "auto"), "auto, owner or client (TRICKLE_MODE)")
	fs.StringVar(&cfg.DataDir, "data", env("TRICKLE_DATA_DIR", "data"), "data directory (TRICKLE_DATA_DIR)")
	fs.StringVar(&cfg.NATSURL, "nats", env("TRICKLE_NATS_URL", ""), "external NATS URLs; empty: embedded server (TRICKLE_NATS_URL)")
	fs.IntVar(&cfg.NATSPort, "nats-port", envInt("TRICKLE_NATS_PORT", cluster.DefaultPort), "embedded NATS port (TRICKLE_NATS_PORT)")
	fs.StringVar(&cfg.Namespace, "namespace", env("TRICKLE_NAMESPACE", "trickle"), "NATS subject and bucket prefix (TRICKLE_NAMESPACE)")
	fs.StringVar(&cfg.WorkerID, "worker-id", env("TRICKLE_WORKER_ID", ""), "worker id; default host-pid-random (TRICKLE_WORKER_ID)")
	fs.IntVar(&cfg.Workers, "workers", envInt("TRICKLE_WORKERS", 16), "observer transactions in flight (TRICKLE_WORKERS)")
	fs.IntVar(&cfg.Scanners, "scanners", envInt("TRICKLE_SCANNERS", 4), "scanning goroutines (TRICKLE_SCANNERS)")
	fs.DurationVar(&cfg.LivenessTTL, "liveness-ttl", envDuration("TRICKLE_LIVENESS_TTL", 10*time.Second), "how long a dead worker's liveness token lasts (TRICKLE_LIVENESS_TTL)")
	fs.DurationVar(&cfg.LockTTL, "lock-ttl", envDuration("TRICKLE_LOCK_TTL", 20*time.Second), "transaction lock TTL (TRICKLE_LOCK_TTL)")
	fs.DurationVar(&cfg.GCInterval, "gc-interval", envDuration("TRICKLE_GC_INTERVAL", 10*time.Minute), "how often the owner collects old versions; negative: never (TRICKLE_GC_INTERVAL)")
	fs.DurationVar(&cfg.GCLag, "gc-lag", envDuration("TRICKLE_GC_LAG", 10*time.Minute), "keep versions this much younger than now (TRICKLE_GC_LAG)")
	fs.StringVar(&cfg.HTTPAddr, "http", env("TRICKLE_HTTP", "127.0.0.1:8080"), "query API, UI and metrics address; off: none (TRICKLE_HTTP)")
	fs.BoolVar(logJSON, "log-json", env("TRICKLE_LOG_JSON", "") != "", "log JSON instead of text (TRICKLE_LOG_JSON)")
	fs.StringVar(logLevel, "log-level", env("TRICKLE_LOG_LEVEL", "info"), "debug, info, warn or error (TRICKLE_LOG_LEVEL)")
}

func logger(jsonLogs bool, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	// Lines logged inside a transaction or an observer run carry its
	// trace_id and span_id.
	return telemetry.NewLogger(os.Stderr, jsonLogs, l), nil
}

func run(ctx context.Context, args []string) error {
	cmd := "run"
	if len(args) > 0 && (args[0] == "wait" || args[0] == "status" || args[0] == "scan" || args[0] == "run" || args[0] == "demo") {
		cmd, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("runner "+cmd, flag.ContinueOnError)
	var cfg runner.Config
	var logJSON bool
	var logLevel string
	flags(fs, &cfg, &logJSON, &logLevel)
	timeout := fs.Duration("timeout", 0, "wait: give up after this long (0: never)")
	start := fs.String("start", "", "scan: first row")
	end := fs.String("end", "", "scan: row bound (exclusive)")
	once := fs.Bool("once", false, "demo: exit after the report instead of serving")
	fs.IntVar(&sampleSize, "sample", sampleSize, "demo: pages of the web index sample and documents of the word count sample")
	traces := fs.String("traces", "", "run, demo: trace exporter: otlp, console (JSON on stdout) or none; default: OTEL_TRACES_EXPORTER, else otlp if OTEL_EXPORTER_OTLP_ENDPOINT is set, else none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *traces != "" {
		os.Setenv("OTEL_TRACES_EXPORTER", *traces)
	}
	log, err := logger(logJSON, logLevel)
	if err != nil {
		return err
	}
	cfg.Logger = log
	cfg.NATS, err = cluster.ConnectOptionsFromEnv("TRICKLE")
	if err != nil {
		return err
	}
	if cmd == "demo" || cmd == "run" {
		// Traces and metrics as the OTEL_* variables say; metrics are
		// served on /metrics whatever they say.
		shutdown, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: "trickle-runner"})
		if err != nil {
			return fmt.Errorf("telemetry: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := shutdown(sctx); err != nil {
				log.Warn("flushing telemetry", "err", err)
			}
		}()
	}
	if cmd == "demo" {
		if sampleSize < 10 {
			return fmt.Errorf("-sample %d: want at least 10", sampleSize)
		}
		return demo(ctx, cfg, *once)
	}
	if cmd == "run" {
		r, err := startPipelines(ctx, cfg)
		if err != nil {
			return err
		}
		defer r.Close()
		return r.Run(ctx)
	}
	cfg.Mode = runner.ModeClient
	if cmd == "scan" && fs.NArg() != 1 {
		return errors.New("usage: runner scan [flags] TABLE")
	}
	node, err := runner.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer node.Close()
	switch cmd {
	case "wait":
		if *timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *timeout)
			defer cancel()
		}
		began := time.Now()
		stuck, err := runner.Wait(ctx, node, runner.WaitOptions{})
		if err != nil {
			return fmt.Errorf("wait: %w", err)
		}
		fmt.Printf("idle after %v\n", time.Since(began).Round(time.Millisecond))
		if len(stuck) > 0 {
			fmt.Printf("%d notifications are stuck (see runner status)\n", len(stuck))
			return fmt.Errorf("%d stuck notifications", len(stuck))
		}
		return nil
	case "status":
		s, err := runner.GetStatus(ctx, node)
		if err != nil {
			return err
		}
		s.Print(os.Stdout)
		return nil
	default:
		var s, e []byte
		if *start != "" {
			s = []byte(*start)
		}
		if *end != "" {
			e = []byte(*end)
		}
		return runner.Scan(ctx, node, fs.Arg(0), s, e, os.Stdout)
	}
}
