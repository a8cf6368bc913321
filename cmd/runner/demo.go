package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/trickle-dev/trickle/runner"
)

// demoDir is the demo's data directory unless -data names another.
const demoDir = "demo-data"

// demoMarker marks a data directory as the demo's own, which a later demo
// may empty.
const demoMarker = "DEMO"

// prepareDemoDir gives the demo an empty data directory, so that its
// verification against a from-scratch computation never meets pages left
// by an earlier run. Its own directory it empties (and says so); one named
// with -data must be empty or absent.
func prepareDemoDir(dir string, named bool, out io.Writer) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return markDemo(dir)
	}
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return markDemo(dir)
	}
	if _, err := os.Stat(filepath.Join(dir, demoMarker)); err != nil {
		if named {
			return fmt.Errorf("demo: the data directory %s is not empty; the demo needs an empty one (leave -data out to use ./%s, which it empties itself)", dir, demoDir)
		}
		return fmt.Errorf("demo: %s exists and is not the demo's (no %s file in it); move it away or give -data an empty directory", dir, demoMarker)
	}
	fmt.Fprintf(out, "starting afresh: removing the previous demo's data in %s\n", dir)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("demo: emptying %s: %w", dir, err)
	}
	return markDemo(dir)
}

// checkListen fails if the HTTP address addr ("off": none) cannot be
// bound, so that the demo stops before it empties anything. The runner
// binds it again when it starts.
func checkListen(addr string) error {
	if addr == "off" || addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("demo: the HTTP address %s cannot be used: %w (pick another with -http ADDR, or -http off); nothing was changed", addr, err)
	}
	return ln.Close()
}

func markDemo(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, demoMarker), []byte("runner demo data: emptied by the next runner demo\n"), 0o600)
}

// demo runs a runner, feeds every pipeline its sample input, waits until
// the pipelines are idle, reports, and keeps running until interrupted.
func demo(ctx context.Context, cfg runner.Config, dataNamed, once bool, exp *exportFlags, out io.Writer) error {
	if sampleSize < 10 {
		return fmt.Errorf("-sample %d: want at least 10", sampleSize)
	}
	if !dataNamed {
		cfg.DataDir = demoDir
	}
	// A taken address would stop the demo only once the runner starts,
	// after the previous demo's data is gone.
	if err := checkListen(cfg.HTTPAddr); err != nil {
		return err
	}
	if err := prepareDemoDir(cfg.DataDir, dataNamed, out); err != nil {
		return err
	}
	if cfg.NATSPort == 0 {
		cfg.NATSPort = -1 // a free port: the demo may run beside a real runner
	}
	r, stopPipelines, err := startPipelines(ctx, cfg, exp)
	if err != nil {
		return err
	}
	defer stopPipelines()
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
		fmt.Fprintf(out, "loading the %s sample...\n", p.name)
		report, err := p.demo(ctx, r)
		if err != nil {
			return err
		}
		reports = append(reports, report)
	}
	fmt.Fprintln(out, "waiting for the observers to finish...")
	stuck, err := runner.Wait(ctx, r.Node(), runner.WaitOptions{})
	if err != nil {
		return err
	}
	s := r.Stats()
	fmt.Fprintf(out, "idle after %v: %d observer transactions, %d notifications with nothing new, %d failures, %d conflicts retried\n",
		time.Since(began).Round(time.Millisecond), s.Runs, s.Skipped, s.Failures, s.Conflicts)
	if len(stuck) > 0 {
		return fmt.Errorf("%d notifications are stuck", len(stuck))
	}
	for _, report := range reports {
		if err := report(ctx, out); err != nil {
			return err
		}
	}
	if once {
		return nil
	}
	fmt.Fprintf(out, "still running (Ctrl-C to stop); try: go run ./cmd/runner -data %s status\n", cfg.DataDir)
	<-ctx.Done()
	stop()
	return <-done
}
