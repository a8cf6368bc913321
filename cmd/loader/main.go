// Command loader seeds web pages into the web index.
//
//	loader --dir PATH --base-url URL     every .html/.htm file under PATH, as URL/<relative path>
//	loader --warc FILE [FILE...]         the HTML responses of WARC files (plain or gzip)
//	loader --jsonl FILE                  JSON Lines: {"url":…,"html":…} or {"url":…,"delete":true}; "-" is stdin
//	loader FILE...                       WARC or JSON Lines files, recognised by content or name
//
// Inputs can be combined and repeated; they are read in command-line order,
// so a deletion in a later input wins over a page in an earlier one.
//
// The loader writes to a running runner over NATS when one owns the data
// directory (or, with -nats, to the runner serving the store on that NATS:
// naming a URL makes the loader a client, never an owner); otherwise it
// opens the store in the data directory itself. The pages' observers run
// in the runners, later if none is running. A runner that stops answering
// is waited for during -unreachable (30s), enough for another runner to
// take over; after that the loader stops with exit status 1, and running it
// again loads what it had not.
//
// Progress goes to stderr (one redrawn line on a terminal, a line every
// -progress otherwise), a summary to stdout. Exit status: 0 when every
// record was loaded, 1 on a fatal error (bad flags, an input that cannot be
// opened, no store, interrupted), 2 when the run completed but some records
// were bad or failed or an input was cut short (each one is logged with its
// file and offset or line). Flags and inputs are checked before the store
// is opened, so a usage error leaves no data directory behind.
//
// An interrupt (Ctrl-C, SIGTERM) stops reading, lets the transactions under
// way commit (for up to 10s), prints the summary and exits 1; a second
// interrupt kills the process at once.
//
// Every flag has an environment variable but the inputs (-dir, -warc,
// -jsonl) and -bulk-resume; see -help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/cmd/internal/cli"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/loader"
	"github.com/trickle-dev/trickle/runner"
	"github.com/trickle-dev/trickle/telemetry"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFatal = 1
	exitBad   = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal stops reading and lets the commits under way finish;
	// a second one kills the process.
	context.AfterFunc(ctx, stop)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// inputKind says how an input is read.
type inputKind string

const (
	kindDir   inputKind = "dir"
	kindWARC  inputKind = "warc"
	kindJSONL inputKind = "jsonl"
	kindAny   inputKind = "file" // positional: format detected
)

type inputSpec struct {
	kind inputKind
	path string
}

// inputFlag appends an input of one kind to a list shared by every input
// flag, keeping the command-line order.
type inputFlag struct {
	kind inputKind
	list *[]inputSpec
}

func (f inputFlag) String() string { return "" }

func (f inputFlag) Set(v string) error {
	if v == "" {
		return errors.New("empty path")
	}
	*f.list = append(*f.list, inputSpec{f.kind, v})
	return nil
}

// config is everything the flags set.
type config struct {
	node        runner.Deployment
	inputs      []inputSpec
	baseURL     string
	batch       int
	concurrency int
	maxBody     int64
	progress    time.Duration
	unreachable time.Duration
	logJSON     bool
	logLevel    string
	bulk        bool
	bulkResume  bool
	bulkMemory  int64
	bulkTemp    string
	store       cli.Store
}

// usageText introduces the loader's flags in -help.
const usageText = `usage: loader [flags] [--dir PATH --base-url URL] [--warc FILE]... [--jsonl FILE]... [FILE...]

Loads web pages into the web index: through the runner that owns the data
directory if one runs (or, with -nats, the runner serving the store on that
NATS), otherwise straight into the store there (the runners index the
pages when they start). Positional FILEs are WARC or JSON Lines, recognised
by content or by name; inputs are read in order. JSON Lines records are
{"url":…,"html":…} or {"url":…,"delete":true}.

Exit status: 0 every record loaded; 1 fatal error (bad flags or an input
that does not exist or cannot be opened, both checked before anything is
written; store or runner unreachable; interrupted: the summary says how
many records were read but not loaded, and running the same command again
completes the load); 2 finished, but some records were bad (invalid URL,
too large, not HTML, malformed input) or failed, or an input was cut short
(truncated, or unreadable part way). Each such record is logged with its
file and byte offset or line. An interrupt stops reading and lets the transactions under way
commit; a second one kills the loader.

flags:
`

func newFlagSet(cfg *config) *cli.Flags {
	fs := cli.New("loader")
	n := &cfg.node
	// The inputs, like FILE arguments, and -bulk-resume, taking over one
	// dead load, are one command line's: they have no variable, which
	// every later load would repeat.
	fs.Var(inputFlag{kindDir, &cfg.inputs}, "dir", "load every .html/.htm file under this directory (repeatable; needs -base-url)")
	fs.NoEnv("dir")
	fs.StringVar(&cfg.baseURL, "base-url", "", "URL of the -dir directories' root: a file's URL is this plus its relative path")
	fs.Env("base-url", "TRICKLE_LOADER_BASE_URL")
	fs.Var(inputFlag{kindWARC, &cfg.inputs}, "warc", "load the HTML responses of this WARC file, plain or gzip; - is stdin (repeatable)")
	fs.NoEnv("warc")
	fs.Var(inputFlag{kindJSONL, &cfg.inputs}, "jsonl", "load this JSON Lines file, plain or gzip; - is stdin (repeatable)")
	fs.NoEnv("jsonl")
	fs.StringVar((*string)(&n.Mode), "mode", "auto", "auto (join the runner owning -data, else open the store), owner or client")
	fs.Env("mode", "TRICKLE_MODE")
	fs.StringVar(&n.DataDir, "data", "data", "data directory")
	fs.Env("data", "TRICKLE_DATA_DIR")
	fs.StringVar(&n.NATSURL, "nats", "", "NATS URL of the runner serving the store (makes the loader a client); empty: the runner owning -data on this machine")
	fs.Env("nats", "TRICKLE_NATS_URL")
	fs.IntVar(&n.NATSPort, "nats-port", 0, "port of the local runner's embedded NATS (default: where the owner of -data announced it); -1: a free one if the loader owns -data")
	fs.Env("nats-port", "TRICKLE_NATS_PORT")
	fs.StoreVars(&cfg.store)
	fs.StringVar(&n.StoreID, "store-id", "", "the id of the store expected behind -nats (default: the data directory's when -nats is not given)")
	fs.Env("store-id", "TRICKLE_STORE_ID")
	fs.StringVar(&n.Namespace, "namespace", "trickle", "NATS subject and bucket prefix")
	fs.Env("namespace", "TRICKLE_NAMESPACE")
	fs.StringVar(&n.WorkerID, "worker-id", "", "id in the locks this loader holds; default loader-host-pid-random")
	fs.Env("worker-id", "TRICKLE_WORKER_ID")
	fs.DurationVar(&n.LockTTL, "lock-ttl", 20*time.Second, "transaction lock TTL")
	fs.Env("lock-ttl", "TRICKLE_LOCK_TTL")
	fs.DurationVar(&n.ConnectTimeout, "connect-timeout", 10*time.Second, "how long to try reaching the runner before giving up")
	fs.Env("connect-timeout", "TRICKLE_CONNECT_TIMEOUT")
	fs.RequestVars(n)
	fs.DurationVar(&cfg.unreachable, "unreachable", loader.DefaultUnreachable, "stop (exit 1) when the store has not answered for this long; until then failed batches are retried")
	fs.Env("unreachable", "TRICKLE_LOADER_UNREACHABLE")
	fs.BoolVar(&cfg.bulk, "bulk", false, "load an empty index in one import: many times faster than page by page; reads all inputs first, sorting them on disk, and computes the index within -bulk-memory")
	fs.Env("bulk", "TRICKLE_LOADER_BULK")
	fs.BoolVar(&cfg.bulkResume, "bulk-resume", false, "with -bulk: take over a bulk load whose process died half way (its fence is up)")
	fs.NoEnv("bulk-resume")
	fs.SizeVar(&cfg.bulkMemory, "bulk-memory", loader.DefaultBulkMemory(), "with -bulk: the memory the load may use (k, m, g suffixes); the records and the index are sorted on disk past it, so any corpus loads in it; the default is a quarter of this machine's, at most 2g")
	fs.Env("bulk-memory", "TRICKLE_LOADER_BULK_MEMORY")
	fs.StringVar(&cfg.bulkTemp, "bulk-temp", "", "with -bulk: where the load spills its sorted runs (default: the system's temporary directory); needs about four times the input free")
	fs.Env("bulk-temp", "TRICKLE_LOADER_BULK_TEMP")
	fs.IntVar(&cfg.batch, "batch", loader.DefaultBatchSize, "pages per transaction")
	fs.Env("batch", "TRICKLE_LOADER_BATCH")
	fs.IntVar(&cfg.concurrency, "concurrency", loader.DefaultConcurrency, "transactions in flight")
	fs.Env("concurrency", "TRICKLE_LOADER_CONCURRENCY")
	fs.SizeVar(&cfg.maxBody, "max-body", input.DefaultMaxBody, "largest page accepted, in bytes (k, m, g suffixes)")
	fs.Env("max-body", "TRICKLE_LOADER_MAX_BODY")
	fs.DurationVar(&cfg.progress, "progress", 5*time.Second, "interval of progress lines when stderr is not a terminal; 0: none")
	fs.Env("progress", "TRICKLE_LOADER_PROGRESS")
	fs.BoolVar(&cfg.logJSON, "log-json", false, "log JSON instead of text")
	fs.Env("log-json", "TRICKLE_LOG_JSON")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.Env("log-level", "TRICKLE_LOG_LEVEL")
	return fs
}

// parseArgs parses flags and positional inputs, which may be interleaved
// (loader --warc a.warc b.warc --jsonl c.jsonl); after "--" everything is
// an input.
func parseArgs(fs *cli.Flags, cfg *config, args []string) error {
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			for _, p := range rest {
				cfg.inputs = append(cfg.inputs, inputSpec{kindAny, p})
			}
			return nil
		}
		cfg.inputs = append(cfg.inputs, inputSpec{kindAny, rest[0]})
		args = rest[1:]
	}
}

func newLogger(w io.Writer, jsonLogs bool, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	o := &slog.HandlerOptions{Level: l}
	if jsonLogs {
		return slog.New(telemetry.NewLogHandler(slog.NewJSONHandler(w, o))), nil
	}
	return slog.New(telemetry.NewLogHandler(slog.NewTextHandler(w, o))), nil
}

// run is the loader command: it returns the exit status.
//
// Its steps are in the order a failure must be met: the arguments and
// settings first (a usage error leaves nothing behind), then the node
// (owning the store or joining a runner), then the load itself.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cfg config
	fs := newFlagSet(&cfg)
	fatal := func(err error) int {
		fmt.Fprintln(stderr, cli.Error("loader", err))
		return exitFatal
	}
	if err := parseArgs(fs, &cfg, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageText)
			fs.PrintDefaults(stdout)
			return exitOK
		}
		return fatal(err)
	}
	dirs, err := checkInputShape(&cfg)
	if err != nil {
		return fatal(err)
	}
	var stats input.Stats
	lopts := loader.Options{BatchSize: cfg.batch, Concurrency: cfg.concurrency, MaxBody: cfg.maxBody, Stats: &stats, Unreachable: cfg.unreachable, Bulk: cfg.bulk, BulkResume: cfg.bulkResume, BulkMemory: cfg.bulkMemory, BulkTempDir: cfg.bulkTemp}
	if err := lopts.EnsureDefaults().Validate(); err != nil {
		return fatal(err)
	}
	if cfg.bulk && os.Getenv("GOMEMLIMIT") == "" {
		// The sorts' buffers take half the budget; the soft limit makes
		// the collector keep the rest (pages in flight, the import's
		// chunks, garbage) within it too, instead of letting the heap
		// double between collections.
		debug.SetMemoryLimit(lopts.BulkMemory)
	}

	term := isTerminal(stderr)
	out := &console{w: stderr, tty: term}
	log, err := newLogger(out, cfg.logJSON, cfg.logLevel)
	if err != nil {
		return fatal(err)
	}
	if err := settleNode(&cfg, log); err != nil {
		return fatal(err)
	}
	// Traces as the OTEL_* variables say: one span per batch, which the
	// runner's observers continue.
	shutdown, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: "trickle-loader"})
	if err != nil {
		return fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		shutdown(sctx)
	}()
	node, err := runner.Open(ctx, cfg.node)
	if err != nil {
		return fatal(err)
	}
	defer node.Close()
	db, err := joinDeployment(ctx, node, log)
	if err != nil {
		return fatal(err)
	}
	lopts.Logger = log
	lopts.OnProblem = nil // log on log, not on the default logger
	l, err := loader.New(db, lopts)
	if err != nil {
		return fatal(err)
	}
	total := int64(-1)
	if dirs == len(cfg.inputs) {
		total = 0
		for _, in := range cfg.inputs {
			total += countHTML(in.path)
		}
	}
	srcs := make([]iter.Seq2[input.Record, error], len(cfg.inputs))
	for i, in := range cfg.inputs {
		srcs[i] = source(in, cfg.baseURL, l.InputOptions())
	}

	interval := cfg.progress
	if term {
		interval = 250 * time.Millisecond
	}
	stopProgress := showProgress(out, interval, func(elapsed time.Duration) string {
		if cfg.bulk {
			return bulkProgressLine(l.BulkProgress(), l.Progress(), elapsed)
		}
		return progressLine(l.Progress(), total, elapsed)
	})
	sum, err := l.Run(ctx, loader.Concat(srcs...))
	stopProgress()
	sum.Print(stdout)
	if err != nil {
		if errors.Is(err, loader.ErrUnreachable) {
			err = fmt.Errorf("%w; the store was reached through %s: once it answers again, run the same command to load the rest (pages already loaded stay unchanged)", err, where(node))
		}
		return fatal(err)
	}
	if !sum.OK() {
		fmt.Fprintf(stderr, "loader: %d bad records, %d failed, %d inputs cut short (see the log above)\n", sum.Bad, sum.Failed, sum.InputErrors)
		return exitBad
	}
	return exitOK
}

// checkInputShape checks the inputs against each other before anything
// is read: at least one, a base URL for directories, stdin at most once.
// It returns how many inputs are directories, whose HTML files can be
// counted up front for the progress line.
func checkInputShape(cfg *config) (dirs int, err error) {
	if len(cfg.inputs) == 0 {
		return 0, errors.New("no input: give --dir, --warc, --jsonl or FILE arguments (see -help)")
	}
	stdin := 0
	for _, in := range cfg.inputs {
		if in.kind == kindDir {
			dirs++
		}
		if in.path == "-" && in.kind != kindDir {
			stdin++
		}
	}
	if dirs > 0 && cfg.baseURL == "" {
		return 0, errors.New("--dir needs --base-url")
	}
	if stdin > 1 {
		return 0, errors.New("stdin (-) can be read only once")
	}
	return dirs, nil
}

// settleNode completes the node's settings (logger, a private store, a
// worker ID of its own, the store and NATS flags) and checks them and the
// inputs, so that a usage error is reported before anything is opened.
func settleNode(cfg *config, log *slog.Logger) error {
	cfg.node.Logger = log
	// Owning the store, the loader does not serve it: a runner started
	// during the load must not join a process that is about to exit.
	cfg.node.Private = true
	if cfg.node.WorkerID == "" {
		host, _ := os.Hostname()
		cfg.node.WorkerID = fmt.Sprintf("loader-%s-%d-%04x", host, os.Getpid(), time.Now().UnixNano()&0xffff)
	}
	if err := cfg.store.Apply(&cfg.node); err != nil {
		return err
	}
	var err error
	if cfg.node.NATS, err = cluster.ConnectOptionsFromEnv(); err != nil {
		return err
	}
	settings := cfg.node
	if err := settings.EnsureDefaults().Validate(); err != nil {
		return err
	}
	return checkInputs(cfg.inputs)
}

// joinDeployment opens the web index's DB on the node: directly on a
// store no runner owns, or as a live worker of the running deployment,
// whose locks are resolved as soon as it is gone, should it die
// mid-commit, and whose running transactions collections keep.
func joinDeployment(ctx context.Context, node *runner.Node, log *slog.Logger) (*framework.DB, error) {
	nc := node.Deployment()
	if node.Owner() {
		log.Info("no runner owns the data directory: loading into the store directly; the pages are indexed when a runner starts", "dir", nc.DataDir)
	} else {
		if node.TiKV() != nil {
			log.Info("loading into the TiKV store", "store", node.StoreID(), "nats", node.URL())
		} else {
			log.Info("loading through a running runner", "nats", node.URL(), "store", node.StoreID())
		}
		if err := node.StartLiveness(ctx, "loader "+nc.WorkerID); err != nil {
			return nil, err
		}
	}
	// The web index's observers, so that pages are notified even in a
	// store no runner has served yet.
	observers := framework.NewRegistry()
	if err := webindex.Register(observers); err != nil {
		return nil, err
	}
	return node.OpenDB(ctx, observers)
}

// showProgress redraws line's result on out every interval until the
// returned function is called, which stops it and clears the line. An
// interval of zero shows nothing.
func showProgress(out *console, interval time.Duration, line func(elapsed time.Duration) string) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	began := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				out.progress(line(time.Since(began)))
			}
		}
	})
	return func() { close(done); wg.Wait(); out.clear() }
}

// where names the store the loader writes to, for messages.
func where(node *runner.Node) string {
	if node.Owner() {
		return "the data directory " + node.Deployment().DataDir
	}
	if node.TiKV() != nil {
		return "the TiKV store " + node.StoreID()
	}
	return "the runner at " + node.URL()
}

// source returns the records of one input.
func source(in inputSpec, baseURL string, opts input.Options) iter.Seq2[input.Record, error] {
	switch in.kind {
	case kindDir:
		return input.Dir(in.path, baseURL, opts)
	case kindWARC:
		return input.WARC(in.path, opts)
	case kindJSONL:
		return func(yield func(input.Record, error) bool) {
			r := io.Reader(os.Stdin)
			if in.path != "-" {
				f, err := os.Open(in.path)
				if err != nil {
					yield(input.Record{}, fmt.Errorf("input: %w", err))
					return
				}
				defer f.Close()
				r = f
			}
			for rec, err := range input.JSONL(in.path, r, opts) {
				if !yield(rec, err) {
					return
				}
			}
		}
	}
	return input.File(in.path, opts)
}

// countHTML counts the files input.Dir would yield under root, for an ETA.
// Errors only make the count lower.
func countHTML(root string) int64 {
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	var n int64
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if ext := strings.ToLower(filepath.Ext(path)); ext == ".html" || ext == ".htm" {
				n++
			}
		}
		return nil
	})
	return n
}

// progressLine describes the counters so far: pages done, the rate and,
// with a known total, the time left.
func progressLine(c loader.Counts, total int64, elapsed time.Duration) string {
	done := c.Processed()
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(done) / s
	}
	var b strings.Builder
	if total >= 0 {
		fmt.Fprintf(&b, "%d/%d pages", done, total)
	} else {
		fmt.Fprintf(&b, "%d pages", done)
	}
	fmt.Fprintf(&b, "  %.0f pages/s", rate)
	if total > 0 && rate > 0 && done < total {
		eta := time.Duration(float64(total-done) / rate * float64(time.Second))
		fmt.Fprintf(&b, "  ETA %v", eta.Round(time.Second))
	}
	fmt.Fprintf(&b, "  loaded %d  replaced %d  unchanged %d  deleted %d", c.Loaded, c.Replaced, c.Unchanged, c.Deleted)
	if c.Skipped > 0 {
		fmt.Fprintf(&b, "  skipped %d", c.Skipped)
	}
	if c.Bad > 0 || c.Failed > 0 || c.InputErrors > 0 {
		fmt.Fprintf(&b, "  bad %d  failed %d", c.Bad, c.Failed)
	}
	return b.String()
}

// bulkProgressLine describes a bulk run so far: its phase and what the
// phase has done. Its pages are all loaded at once at the end, so the
// loaded count and a rate would say nothing until then.
func bulkProgressLine(st loader.BulkStatus, c loader.Counts, elapsed time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "bulk %s", st.Phase)
	switch st.Phase {
	case loader.BulkReading:
		fmt.Fprintf(&b, "  %d records read", c.Read)
	case loader.BulkParsing:
		fmt.Fprintf(&b, "  %d records read", c.Read)
	case loader.BulkImporting:
		fmt.Fprintf(&b, "  %d pages", st.Pages)
	}
	fmt.Fprintf(&b, "  %v", elapsed.Round(time.Second))
	if c.Skipped > 0 {
		fmt.Fprintf(&b, "  skipped %d", c.Skipped)
	}
	if c.Bad > 0 || c.InputErrors > 0 {
		fmt.Fprintf(&b, "  bad %d", c.Bad)
	}
	return b.String()
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// console is stderr shared by the log and the progress display. On a
// terminal the progress is one line redrawn in place, erased before a log
// line is written so that the two never mix; otherwise each progress report
// is a line of its own.
type console struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	shown bool // a progress line is on screen
}

const eraseLine = "\r\x1b[K"

// Write writes a log record.
func (c *console) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shown {
		io.WriteString(c.w, eraseLine)
		c.shown = false
	}
	return c.w.Write(b)
}

func (c *console) progress(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tty {
		io.WriteString(c.w, eraseLine+line)
		c.shown = true
		return
	}
	io.WriteString(c.w, "progress: "+line+"\n")
}

func (c *console) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shown {
		io.WriteString(c.w, eraseLine)
		c.shown = false
	}
}
