// Command runner runs the registered pipelines' observers.
//
//	runner [flags]                  run workers (owning ./data, or joining its owner)
//	runner demo [flags]             run the pipelines on their built-in sample input, verify, keep serving
//	runner wait [flags]             return when the pipelines are idle
//	runner status [flags]           workers alive, pending and failing notifications, oracle position
//	runner scan [flags] [TABLE]     print a table's raw cells with lock/write/ack/notify metadata; no TABLE: list tables
//	runner backfill [flags] OBSERVER  notify every existing cell of a new observer's columns, resumably
//	runner unpublish [flags] OBSERVER...  stop publishing observers no runner runs any more
//	runner help                     this list and the flags
//
// Flags may come before or after the command. Every flag has an
// environment variable but those that say what one command line does
// (-start, -end, -restart); see -help.
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
	"strings"
	"syscall"
	"time"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/cmd/internal/cli"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/ui"
	"github.com/trickle-dev/trickle/pipelines/wordcount"
	"github.com/trickle-dev/trickle/runner"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/telemetry"
)

// pipeline is one application this binary runs: its observers, and for the
// demo a built-in sample input and a report that checks the result.
type pipeline struct {
	name     string
	register func(*framework.Registry) error
	// serve, if set, mounts the pipeline's HTTP endpoints on the runner;
	// what it starts beside them ends with ctx.
	serve func(ctx context.Context, mux *http.ServeMux, r *runner.Runner, log *slog.Logger)
	// demo loads the sample input and returns a function that reports on
	// (and verifies) the result once the pipeline is idle.
	demo func(ctx context.Context, r *runner.Runner) (report func(context.Context, io.Writer) error, err error)
}

// pipelines lists what this binary runs. To run your own observers, build
// your own binary the same way (see examples/custom-runner).
var pipelines = []pipeline{
	{
		name:     "webindex",
		register: func(reg *framework.Registry) error { return webIndex.Register(reg) },
		serve: func(ctx context.Context, mux *http.ServeMux, r *runner.Runner, log *slog.Logger) {
			mux.Handle("/api/", webIndex.Handler(r.DB(), log))
			// Server-rendered pages, readable without JavaScript, with
			// the deployment's status and its charts; the script UI over
			// the JSON API stays at /app/.
			status, history := statusPage(r, webExport), ui.NewHistory(time.Hour)
			go sampleStatus(ctx, status, r.Stats, history, statusSampleEvery, log)
			opts := []ui.ServerOption{ui.WithStatus(status), ui.WithHistory(history)}
			if recentTraces != nil {
				opts = append(opts, ui.WithTraces(recentTraces))
			}
			mux.Handle("/", ui.Server(webIndex, r.DB(), log, opts...))
			mux.Handle("/app/", http.StripPrefix("/app", ui.Handler()))
		},
		demo: webindexDemo,
	},
	{
		name:     "wordcount",
		register: wordcount.Register,
		demo: func(ctx context.Context, r *runner.Runner) (func(context.Context, io.Writer) error, error) {
			docs, err := wordcount.Sample(ctx, r.DB(), sampleSize)
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, w io.Writer) error { return wordcount.Verify(ctx, r.DB(), docs, w) }, nil
		},
	},
}

// webExport is the web index's export under -export; nil without.
var webExport *exporting

// recentTraces keeps the observer chains the web index's /traces page
// draws; nil when -traces-keep is 0 or outside run and demo.
var recentTraces *telemetry.Recent

// webIndex is the web index the runner serves: with default options,
// and with an export queue under -export (set up before the runner
// starts).
var webIndex = func() *webindex.Index {
	ix, err := webindex.New(nil)
	if err != nil {
		panic(err)
	}
	return ix
}()

// startPipelines starts a runner for every pipeline and mounts their
// endpoints; with exp enabled, the web index exports its canonical table.
// stop closes the runner, then the export's sink (a PostgreSQL sink's
// connections), once no observer can export any more.
func startPipelines(ctx context.Context, cfg runner.Config, exp *exportFlags) (r *runner.Runner, stop func(), err error) {
	r, sink, err := startRunnerWithSink(ctx, cfg, exp)
	if err != nil {
		return nil, nil, err
	}
	return r, func() {
		r.Close()
		sink.close()
	}, nil
}

// startRunnerWithSink is startPipelines' start: the registry, the runner, the
// export's sink connected over the runner's NATS connection, the
// pipelines' endpoints.
func startRunnerWithSink(ctx context.Context, cfg runner.Config, exp *exportFlags) (*runner.Runner, *deferredSink, error) {
	on, err := exp.enabled()
	if err != nil {
		return nil, nil, err
	}
	var sink *deferredSink // nil: no export
	if on {
		var q *export.Queue
		if webIndex, q, sink, err = exportingIndex(); err != nil {
			return nil, nil, err
		}
		webExport = &exporting{queue: q, sink: exp.describe()}
	}
	reg, err := registry()
	if err != nil {
		return nil, nil, err
	}
	r, err := runner.Start(ctx, cfg, reg)
	if err != nil {
		return nil, nil, err
	}
	if sink != nil {
		if err := sink.connect(ctx, r.Node().Conn(), exp); err != nil {
			r.Close()
			return nil, nil, err
		}
	}
	for _, p := range pipelines {
		if p.serve != nil {
			p.serve(ctx, r.Mux(), r, cfg.Logger)
		}
	}
	return r, sink, nil
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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// commands are the subcommands, in the order help lists them.
var commands = []struct{ name, args, what string }{
	{"run", "", "run the pipelines' observers (the default): own the data directory, or join the runner that owns it and take over if it dies"},
	{"demo", "", "run the pipelines on their built-in samples in a fresh data directory, verify the result, keep serving"},
	{"wait", "", "return when no notification is pending and no transaction runs (exit 1 if some are stuck)"},
	{"status", "", "show workers alive, pending and failing notifications, the oracle's position"},
	{"scan", "[TABLE]", "print a table's raw cells (values, locks, write and rollback records, acks, notifications); no TABLE: list the tables"},
	{"backfill", "OBSERVER", "bring an observer added to a loaded store up to date: notify every existing cell of its columns, in batches, resuming where an interrupted run stopped (-restart: from the start)"},
	{"unpublish", "OBSERVER...", "remove retired observers from the published ones, so that writers stop notifying their columns (runners only ever add theirs; one that still runs an observer publishes it again when it starts)"},
	{"help", "", "show this help"},
}

func isCommand(s string) bool {
	for _, c := range commands {
		if c.name == s {
			return true
		}
	}
	return false
}

// options is everything the flags set.
type options struct {
	cfg      runner.Config
	logJSON  bool
	logLevel string
	timeout  time.Duration
	start    string
	end      string
	once     bool
	traces   string
	// tracesKeep and tracesSample size the traces page's buffer
	// (telemetry.RecentOptions).
	tracesKeep   int
	tracesSample float64
	storeID      string
	store        cli.Store
	// storeCacheMiB sets cfg.StoreCacheSize.
	storeCacheMiB int
	// backfillRows and restart are backfill's.
	backfillRows int
	restart      bool
	export       exportFlags
}

func newFlags(o *options) *cli.Flags {
	fs := cli.New("runner")
	cfg := &o.cfg
	env := func(name, v string) { fs.Env(name, v) }
	fs.StringVar((*string)(&cfg.Mode), "mode", "auto", "auto, owner or client")
	env("mode", "TRICKLE_MODE")
	fs.StringVar(&cfg.DataDir, "data", "data", "data directory (demo: demo-data, emptied first)")
	env("data", "TRICKLE_DATA_DIR")
	fs.StringVar(&cfg.NATSURL, "nats", "", "NATS URL of the deployment; makes this process a client unless -mode owner; empty: the embedded server of the data directory's owner")
	env("nats", "TRICKLE_NATS_URL")
	fs.IntVar(&cfg.NATSPort, "nats-port", 0, "embedded NATS port: where an owner listens (default 4222) and a client connects (default: where the data directory's owner announced)")
	env("nats-port", "TRICKLE_NATS_PORT")
	fs.StoreVars(&o.store)
	fs.StringVar(&o.storeID, "store-id", "", "the id of the store a client expects (default: the data directory's, when no -nats URL is given)")
	env("store-id", "TRICKLE_STORE_ID")
	fs.StringVar(&cfg.Namespace, "namespace", "trickle", "NATS subject and bucket prefix")
	env("namespace", "TRICKLE_NAMESPACE")
	fs.StringVar(&cfg.WorkerID, "worker-id", "", "worker id; default host-pid-random")
	env("worker-id", "TRICKLE_WORKER_ID")
	fs.IntVar(&o.storeCacheMiB, "store-cache-mb", int(store.DefaultCacheSize>>20), "owner: block cache ceiling of the store, in MiB (transactions re-read what they check and commit: size it for the hot data)")
	env("store-cache-mb", "TRICKLE_STORE_CACHE_MB")
	fs.IntVar(&cfg.Workers, "workers", 0, "observer transactions in flight (default 16; 64 on a TiKV store)")
	env("workers", "TRICKLE_WORKERS")
	fs.IntVar(&cfg.Scanners, "scanners", 4, "scanning goroutines")
	env("scanners", "TRICKLE_SCANNERS")
	fs.DurationVar(&cfg.LivenessTTL, "liveness-ttl", 10*time.Second, "how long a dead worker's liveness token lasts")
	env("liveness-ttl", "TRICKLE_LIVENESS_TTL")
	fs.DurationVar(&cfg.LockTTL, "lock-ttl", 20*time.Second, "transaction lock TTL")
	env("lock-ttl", "TRICKLE_LOCK_TTL")
	fs.DurationVar(&cfg.GCInterval, "gc-interval", 10*time.Minute, "how often the owner collects old versions; negative: never")
	env("gc-interval", "TRICKLE_GC_INTERVAL")
	fs.DurationVar(&cfg.GCLag, "gc-lag", time.Minute, "keep versions this much younger than now (workers' running transactions are kept whatever their age)")
	env("gc-lag", "TRICKLE_GC_LAG")
	fs.IntVar(&cfg.GCSettledAfter, "gc-settled-after", 20000, "also collect once this many timestamps were issued since the last collection and the store has been quiet for -gc-lag; negative: never")
	env("gc-settled-after", "TRICKLE_GC_SETTLED_AFTER")
	fs.StringVar(&cfg.HTTPAddr, "http", "127.0.0.1:8080", "query API, UI and metrics address; off: none; a taken address is an error")
	env("http", "TRICKLE_HTTP")
	fs.DurationVar(&cfg.ConnectTimeout, "connect-timeout", 10*time.Second, "how long to try reaching the store before giving up")
	env("connect-timeout", "TRICKLE_CONNECT_TIMEOUT")
	fs.RequestVars(&cfg.Deployment)
	fs.BoolVar(&o.logJSON, "log-json", false, "log JSON instead of text")
	env("log-json", "TRICKLE_LOG_JSON")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	env("log-level", "TRICKLE_LOG_LEVEL")
	fs.DurationVar(&o.timeout, "timeout", 0, "wait, status, scan: give up after this long, connecting included (0: no limit beyond -connect-timeout and each request's)")
	env("timeout", "TRICKLE_TIMEOUT")
	// A scan's rows and a backfill's restart are one command line's: a
	// variable left set would apply them to every later one.
	fs.StringVar(&o.start, "start", "", "scan: first row")
	fs.NoEnv("start")
	fs.StringVar(&o.end, "end", "", "scan: row bound (exclusive)")
	fs.NoEnv("end")
	fs.BoolVar(&o.once, "once", false, "demo: exit after the report instead of serving")
	env("once", "TRICKLE_DEMO_ONCE")
	o.export.register(fs)
	fs.IntVar(&o.backfillRows, "batch-rows", 500, "backfill: rows read and notified per batch")
	env("batch-rows", "TRICKLE_BACKFILL_BATCH_ROWS")
	fs.BoolVar(&o.restart, "restart", false, "backfill: start over instead of resuming an interrupted backfill")
	fs.NoEnv("restart")
	fs.IntVar(&sampleSize, "sample", sampleSize, "demo: pages of the web index sample and documents of the word count sample")
	env("sample", "TRICKLE_DEMO_SAMPLE")
	fs.StringVar(&o.traces, "traces", "", "run, demo: trace exporter: otlp, console (JSON lines on stderr), file:PATH (JSON lines appended to PATH) or none; default: OTEL_TRACES_EXPORTER, else otlp if OTEL_EXPORTER_OTLP_ENDPOINT is set, else none")
	env("traces", "TRICKLE_TRACES")
	fs.IntVar(&o.tracesKeep, "traces-keep", 200, "run, demo: observer chains kept in memory for the /traces page; 0: no page")
	env("traces-keep", "TRICKLE_TRACES_KEEP")
	fs.Float64Var(&o.tracesSample, "traces-sample", 0.1, "run, demo: share of the traces this runner starts that it records for /traces and any exporter, unless OTEL_TRACES_SAMPLER is set (1: all)")
	env("traces-sample", "TRICKLE_TRACES_SAMPLE")
	return fs
}

// usage prints the commands and the flags.
func usage(w io.Writer, fs *cli.Flags) {
	fmt.Fprintln(w, "usage: runner [COMMAND] [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-21s %s\n", c.name+" "+c.args, c.what)
	}
	fmt.Fprintln(w, "\nFlags may come before or after the command; environment variables set them too (named")
	fmt.Fprintln(w, "after each flag), and the command line wins. NATS credentials and TLS for a -nats URL come from")
	fmt.Fprintln(w, "TRICKLE_NATS_CREDS, _NKEY, _USER and _PASSWORD, _TOKEN, _TLS_CA, _TLS_CERT and _TLS_KEY.")
	fmt.Fprintln(w, "With -store tikv://PD:PORT,... every process opens the TiKV cluster itself (no owner, PD is the")
	fmt.Fprintln(w, "oracle) and -nats must name the NATS server all of them share.")
	fmt.Fprintln(w, "\nflags:")
	fs.PrintDefaults(w)
}

// parse reads the flags and the command: flags may come before and after
// it and its arguments.
func parse(fs *cli.Flags, args []string) (cmd string, rest []string, err error) {
	if err := fs.Parse(args); err != nil {
		return "", nil, err
	}
	cmd = "run"
	if fs.NArg() > 0 {
		cmd = fs.Arg(0)
		if !isCommand(cmd) {
			return "", nil, fmt.Errorf("unknown command %q (commands: run, demo, wait, status, scan, backfill, unpublish, help)", cmd)
		}
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return "", nil, err
		}
	}
	// Flags may follow the command's arguments too.
	for fs.NArg() > 0 {
		rest = append(rest, fs.Arg(0))
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return "", nil, err
		}
	}
	switch {
	case cmd == "scan" && len(rest) > 1:
		return "", nil, fmt.Errorf("scan takes at most one table, got %q", rest)
	case cmd == "backfill" && len(rest) != 1:
		return "", nil, fmt.Errorf("backfill takes one observer, got %q (runner status lists them)", rest)
	case cmd == "unpublish" && len(rest) == 0:
		return "", nil, fmt.Errorf("unpublish takes the observers to remove (runner status lists them)")
	case cmd != "scan" && cmd != "backfill" && cmd != "unpublish" && len(rest) > 0:
		return "", nil, fmt.Errorf("%s takes no arguments, got %q", cmd, rest)
	}
	return cmd, rest, nil
}

func logger(w io.Writer, jsonLogs bool, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("-log-level %q: want debug, info, warn or error", level)
	}
	// Lines logged inside a transaction or an observer run carry its
	// trace_id and span_id.
	return telemetry.NewLogger(w, jsonLogs, l), nil
}

// run is the runner command: it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	fs := newFlags(&o)
	cmd, rest, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) || err == nil && cmd == "help" {
		usage(stdout, fs)
		return 0
	}
	if err == nil {
		err = runCommand(ctx, cmd, rest, fs, &o, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintln(stderr, cli.Error("runner", err))
		return 1
	}
	return 0
}

// runCommand runs cmd: the serving commands (run, demo) own or join the
// deployment and run its observers; the others are its clients.
func runCommand(ctx context.Context, cmd string, rest []string, fs *cli.Flags, o *options, stdout, stderr io.Writer) error {
	log, err := logger(stderr, o.logJSON, o.logLevel)
	if err != nil {
		return err
	}
	cfg, err := runnerConfig(o, log)
	if err != nil {
		return err
	}
	if cmd == "run" || cmd == "demo" {
		return serve(ctx, cmd, cfg, fs, o, log, stdout)
	}
	return clientCommand(ctx, cmd, rest, cfg, o, stdout)
}

// runnerConfig is the runner's configuration from the flags and the
// environment: the store, its cache, the NATS connection.
func runnerConfig(o *options, log *slog.Logger) (runner.Config, error) {
	cfg := o.cfg
	cfg.Logger = log
	cfg.StoreID = o.storeID
	if o.storeCacheMiB <= 0 {
		return cfg, fmt.Errorf("-store-cache-mb %d: want a positive number of MiB", o.storeCacheMiB)
	}
	cfg.StoreCacheSize = int64(o.storeCacheMiB) << 20
	if err := o.store.Apply(&cfg.Deployment); err != nil {
		return cfg, err
	}
	var err error
	if cfg.NATS, err = cluster.ConnectOptionsFromEnv(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// serve runs the pipelines (run) or their samples (demo), with traces and
// metrics as the flags and the OTEL_* variables say; metrics are served
// on /metrics whatever they say.
func serve(ctx context.Context, cmd string, cfg runner.Config, fs *cli.Flags, o *options, log *slog.Logger, stdout io.Writer) error {
	topts := telemetry.Options{ServiceName: "trickle-runner"}
	if path, ok := strings.CutPrefix(o.traces, "file:"); ok {
		if path == "" {
			return errors.New("-traces file: needs a path (file:PATH)")
		}
		topts.TraceFile = path
	} else if o.traces != "" {
		os.Setenv("OTEL_TRACES_EXPORTER", o.traces)
	}
	if o.tracesKeep > 0 {
		var err error
		if recentTraces, err = telemetry.NewRecent(&telemetry.RecentOptions{Traces: o.tracesKeep, Sample: o.tracesSample}); err != nil {
			return fmt.Errorf("-traces-keep %d -traces-sample %g: %w", o.tracesKeep, o.tracesSample, err)
		}
		topts.Recent = recentTraces
	}
	shutdown, err := telemetry.Setup(ctx, topts)
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
	if cmd == "demo" {
		return demo(ctx, cfg, fs.IsSet("data"), o.once, &o.export, stdout)
	}
	r, stopPipelines, err := startPipelines(ctx, cfg, &o.export)
	if err != nil {
		return err
	}
	defer stopPipelines()
	return r.Run(ctx)
}

// clientCommand runs one of the commands that are the deployment's
// clients (wait, status, backfill, unpublish, scan); -timeout bounds all
// of it, connecting included.
func clientCommand(ctx context.Context, cmd string, rest []string, cfg runner.Config, o *options, stdout io.Writer) error {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	cfg.Mode = runner.ModeClient
	node, err := runner.Open(ctx, cfg.Deployment)
	if err != nil {
		return err
	}
	defer node.Close()
	switch cmd {
	case "wait":
		began := time.Now()
		stuck, err := runner.Wait(ctx, node, runner.WaitOptions{})
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) && o.timeout > 0 {
				return fmt.Errorf("wait: still busy after -timeout %v", o.timeout)
			}
			return fmt.Errorf("wait: %w", err)
		}
		fmt.Fprintf(stdout, "idle after %v\n", time.Since(began).Round(time.Millisecond))
		if len(stuck) > 0 {
			return fmt.Errorf("wait: %d notifications are stuck (see runner status)", len(stuck))
		}
		return nil
	case "status":
		s, err := runner.GetStatus(ctx, node)
		if err != nil {
			return err
		}
		s.Print(stdout)
		if on, err := o.export.enabled(); err != nil || !on {
			return err
		}
		return printExportStatus(ctx, node, &o.export, stdout)
	case "backfill":
		return backfill(ctx, node, rest[0], o, stdout)
	case "unpublish":
		n, err := runner.Unpublish(ctx, node, rest...)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "unpublished %d columns of %s\n", n, strings.Join(rest, ", "))
		return nil
	}
	return scanCommand(ctx, node, rest, o, stdout)
}

// scanCommand prints a table's raw cells between -start and -end, or,
// with no table named, the tables.
func scanCommand(ctx context.Context, node *runner.Node, rest []string, o *options, stdout io.Writer) error {
	if len(rest) == 0 {
		tables, err := runner.Tables(ctx, node)
		if err != nil {
			return err
		}
		for _, t := range tables {
			fmt.Fprintln(stdout, t)
		}
		return nil
	}
	var s, e []byte
	if o.start != "" {
		s = []byte(o.start)
	}
	if o.end != "" {
		e = []byte(o.end)
	}
	return runner.Scan(ctx, node, rest[0], s, e, stdout)
}
