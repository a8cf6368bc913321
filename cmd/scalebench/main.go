// Command scalebench measures the web index at scale, as a user growing a
// corpus would: it generates N pages with the sample generator
// (pipelines/webindex/sample) as the loader's JSON Lines, bulk-loads them
// into an empty data directory with `loader -bulk` (no runner up), then
// starts a runner, loads the generator's 1 % step page by page through
// it, and runs a fixed set of queries against the runner's search API.
// It prints the input size, the bulk load's wall time, CPU time and peak
// resident set (from the child's rusage), the runner's CPU for the step
// (from /proc), their ratio, and the queries' p50 and p99 latency.
//
//	scalebench [-pages 100000] [-seed 1] [-bin DIR] [-work DIR] [-bulk-memory SIZE]
//
// The loader and runner are built from this module into the work
// directory unless -bin names a directory holding both (how an older
// version is measured). The work directory, a temporary one by default,
// is removed at the end unless -keep.
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
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// config is what the flags set.
type config struct {
	pages, queries     int
	seed               int64
	step               float64
	bin, work          string
	keep, generateOnly bool
	bulkMemory, logDir string
	// stepProfile, if set, receives a CPU profile of the runner over
	// the first stepProfileFor of the step.
	stepProfile    string
	stepProfileFor time.Duration
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

// run parses args, runs the benchmark and prints its report to stdout.
func run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if cfg.work == "" {
		if cfg.work, err = os.MkdirTemp("", "scalebench-"); err != nil {
			return err
		}
		if !cfg.keep && !cfg.generateOnly {
			defer os.RemoveAll(cfg.work)
		}
	}
	if err := os.MkdirAll(cfg.work, 0o755); err != nil {
		return err
	}
	b := &bench{cfg: cfg, log: log}
	r, err := b.run(ctx)
	if err != nil {
		return err
	}
	if cfg.generateOnly {
		fmt.Fprintf(stdout, "%d pages (%d bytes) and %d changes in %s\n", r.pages, r.inputBytes, r.changes, cfg.work)
		return nil
	}
	r.print(stdout)
	return nil
}

func parseArgs(args []string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("scalebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.pages, "pages", 100_000, "pages to generate")
	fs.Int64Var(&cfg.seed, "seed", 1, "generator seed")
	fs.Float64Var(&cfg.step, "step", 0.01, "fraction of the pages the change after the bulk load involves (the generator's Step)")
	fs.IntVar(&cfg.queries, "queries", 20, "queries of 1-3 of the generator's 25 most frequent words")
	fs.StringVar(&cfg.bin, "bin", "", "directory holding the loader and runner binaries to measure (default: built from this module)")
	fs.StringVar(&cfg.work, "work", "", "work directory (default: a temporary one)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the work directory")
	fs.BoolVar(&cfg.generateOnly, "generate-only", false, "only write pages.jsonl and changes.jsonl into -work (kept)")
	fs.StringVar(&cfg.bulkMemory, "bulk-memory", "", "passed to loader -bulk-memory (default: the loader's)")
	fs.StringVar(&cfg.logDir, "logs", "", "directory for the children's logs (default: the work directory)")
	fs.StringVar(&cfg.stepProfile, "step-profile", "", "write a CPU profile of the runner during the step to this file (from its /debug/pprof/profile)")
	fs.DurationVar(&cfg.stepProfileFor, "step-profile-for", 10*time.Second, "how much of the step -step-profile covers, from its start")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	case cfg.pages < 1:
		return nil, errors.New("-pages must be at least 1")
	case cfg.step <= 0 || cfg.step > 1:
		return nil, errors.New("-step must be in (0, 1]")
	case cfg.queries < 1:
		return nil, errors.New("-queries must be at least 1")
	}
	return cfg, nil
}

// report is what one run measured.
type report struct {
	pages, changes       int
	inputBytes           int64
	bulkWall, bulkCPU    time.Duration
	bulkRSS              int64 // bytes
	stepCPU, stepWall    time.Duration
	loaderStepCPU        time.Duration
	p50, p99             time.Duration
	queries, matchesMean int
	cores                int
}

func (r *report) print(w io.Writer) {
	ratio := float64(r.bulkCPU) / float64(max(r.stepCPU, time.Millisecond))
	fmt.Fprintf(w, "cores                     %d\n", r.cores)
	fmt.Fprintf(w, "pages                     %d\n", r.pages)
	fmt.Fprintf(w, "input                     %.0f MB\n", float64(r.inputBytes)/1e6)
	fmt.Fprintf(w, "bulk wall                 %v\n", r.bulkWall.Round(100*time.Millisecond))
	fmt.Fprintf(w, "bulk CPU                  %v (%.2f ms per page)\n", r.bulkCPU.Round(100*time.Millisecond), float64(r.bulkCPU)/float64(time.Millisecond)/float64(r.pages))
	fmt.Fprintf(w, "bulk peak RSS             %.2f GB\n", float64(r.bulkRSS)/1e9)
	fmt.Fprintf(w, "step changes              %d\n", r.changes)
	fmt.Fprintf(w, "step runner CPU           %v (wall %v, loader CPU %v)\n", r.stepCPU.Round(100*time.Millisecond), r.stepWall.Round(100*time.Millisecond), r.loaderStepCPU.Round(100*time.Millisecond))
	fmt.Fprintf(w, "bulk CPU / step CPU       %.1f×\n", ratio)
	fmt.Fprintf(w, "search p50 / p99          %v / %v (%d queries, %d matches on average)\n", r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), r.queries, r.matchesMean)
	fmt.Fprintf(w, "\n| %d | %.0f MB | %v | %v | %.2f GB | %v | %.1f× | %v / %v |\n", r.pages, float64(r.inputBytes)/1e6,
		r.bulkWall.Round(100*time.Millisecond), r.bulkCPU.Round(100*time.Millisecond), float64(r.bulkRSS)/1e9,
		r.stepCPU.Round(100*time.Millisecond), ratio, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond))
}

// bench is one run of the benchmark.
type bench struct {
	cfg *config
	log *slog.Logger
}

// run measures: generate, bulk load, step, queries.
func (b *bench) run(ctx context.Context) (*report, error) {
	r := &report{pages: b.cfg.pages, cores: runtime.NumCPU()}
	pagesFile, changesFile := filepath.Join(b.cfg.work, "pages.jsonl"), filepath.Join(b.cfg.work, "changes.jsonl")
	b.log.Info("generating", "pages", b.cfg.pages)
	var err error
	if b.cfg.generateOnly {
		r.changes, err = generate(b.cfg.seed, b.cfg.pages, b.cfg.step, pagesFile, changesFile)
	} else {
		r.changes, err = b.generateApart(ctx)
	}
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(pagesFile)
	if err != nil {
		return nil, err
	}
	r.inputBytes = fi.Size()
	if b.cfg.generateOnly {
		return r, nil
	}
	bin, err := b.binaries(ctx)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(b.cfg.work, "data")
	if err := b.bulkLoad(ctx, bin, data, pagesFile, r); err != nil {
		return nil, err
	}
	if err := b.stepAndSearch(ctx, bin, data, changesFile, r); err != nil {
		return nil, err
	}
	return r, nil
}
