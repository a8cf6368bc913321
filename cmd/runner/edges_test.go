package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
	"github.com/trickle-dev/trickle/runner"
)

var (
	loaderOnce sync.Once
	loaderPath string
	loaderErr  error
)

// loaderBinary builds the loader once for the tests that run it.
func loaderBinary(t *testing.T) string {
	t.Helper()
	loaderOnce.Do(func() {
		dir, err := os.MkdirTemp("", "trickle-loader-")
		if err != nil {
			loaderErr = err
			return
		}
		loaderPath = filepath.Join(dir, "loader")
		if out, err := exec.Command("go", "build", "-o", loaderPath, "github.com/trickle-dev/trickle/cmd/loader").CombinedOutput(); err != nil {
			loaderErr = fmt.Errorf("building the loader: %v\n%s", err, out)
		}
	})
	if loaderErr != nil {
		t.Fatal(loaderErr)
	}
	return loaderPath
}

// loaderProc is a running loader process.
type loaderProc struct {
	cmd    *exec.Cmd
	stdout bytes.Buffer
	exited chan struct{} // closed once cmd.Wait returned, into err
	err    error

	mu        sync.Mutex
	processed int64 // pages done, from its latest progress line
	started   chan struct{}
}

var progressRe = regexp.MustCompile(`progress: (\d+)`)

// startLoader runs the loader binary; started is closed once it reports
// its first pages done.
func startLoader(t *testing.T, args ...string) *loaderProc {
	t.Helper()
	l := &loaderProc{cmd: exec.Command(loaderBinary(t), append([]string{"-progress", "100ms", "-log-level", "warn"}, args...)...),
		exited: make(chan struct{}), started: make(chan struct{})}
	l.cmd.Stdout = &l.stdout
	stderr, err := l.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		var once sync.Once
		for sc.Scan() {
			line := sc.Text()
			if m := progressRe.FindStringSubmatch(line); m != nil {
				n, _ := strconv.ParseInt(m[1], 10, 64)
				if n > 0 {
					once.Do(func() { close(l.started) })
				}
				continue
			}
			t.Logf("[loader] %s", line)
		}
		l.err = l.cmd.Wait()
		close(l.exited)
	}()
	t.Cleanup(func() {
		_ = l.cmd.Process.Kill() // os.ErrProcessDone once it has ended
		<-l.exited
	})
	return l
}

// exit waits for the loader to end and returns its exit status.
func (l *loaderProc) exit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-l.exited:
		err := l.err
		t.Logf("[loader] summary:\n%s", l.stdout.String())
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(within):
		t.Fatalf("the loader did not end within %v", within)
		return -1
	}
}

// inMidLoad waits until the loader has loaded some pages, and fails the
// test if it finished first (the corpus is then too small to test anything).
func (l *loaderProc) inMidLoad(t *testing.T) {
	t.Helper()
	select {
	case <-l.started:
	case <-l.exited:
		t.Fatalf("the loader ended (%v) before it was interrupted; the test proves nothing", l.err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the loader made no progress")
	}
}

// corpus writes a generated site to a directory.
func corpus(t *testing.T, pages int) (*sample.Corpus, string) {
	t.Helper()
	c, err := sample.New(sample.Options{Pages: pages, Seed: 11, BaseURL: "http://docs.example/"})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "pages")
	if err := c.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	return c, dir
}

// verifyIndex waits until the deployment is idle and compares the index
// with a from-scratch computation of the corpus.
func verifyIndex(t *testing.T, ctx context.Context, dir string, port int, c *sample.Corpus) {
	t.Helper()
	node, db := client(t, ctx, dir, port)
	stuck, err := runner.Wait(ctx, node, runner.WaitOptions{Poll: 50 * time.Millisecond})
	if err != nil || len(stuck) > 0 {
		t.Fatalf("wait: %v, stuck %v", err, stuck)
	}
	pages, err := c.Pages()
	if err != nil {
		t.Fatal(err)
	}
	checked, diffs, err := webIndex.Verify(ctx, db, batch.Compute(pages), nil, []string{sample.Word(1), sample.Word(2) + " " + sample.Word(3)}, 20)
	if err != nil {
		t.Fatal(err)
	}
	if checked != len(pages) || len(diffs) > 0 {
		t.Fatalf("checked %d of %d pages; the index differs from a from-scratch computation:\n%s", checked, len(pages), strings.Join(diffs, "\n"))
	}
}

// summaryValue reads one counter of the loader's summary.
func summaryValue(out, name string) int {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, name+" ") {
			if f := strings.Fields(strings.TrimPrefix(line, name)); len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return 0
}

// A loader whose runner is killed mid-load notices it within its
// -unreachable time, stops, reports how many records it read but did not
// load and exits 1; once a runner is back, running it again completes the
// load, and the index equals a from-scratch computation.
func TestLoaderStopsWhenItsRunnerDies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, port := t.TempDir(), freePort(t)
	c, pagesDir := corpus(t, 400)
	owner := startRunner(t, "owner", dir, port)
	client(t, ctx, dir, port) // serving
	args := []string{"-dir", pagesDir, "-base-url", c.BaseURL(), "-data", dir, "-unreachable", "3s"}
	l := startLoader(t, args...)
	l.inMidLoad(t)
	owner.kill()
	if code := l.exit(t, time.Minute); code != 1 {
		t.Fatalf("loader exit %d after its runner died, want 1", code)
	}
	first := l.stdout.String()
	if summaryValue(first, "not loaded") == 0 && summaryValue(first, "loaded") == c.Len() {
		t.Fatalf("the first run loaded everything; the test proves nothing:\n%s", first)
	}

	startRunner(t, "owner-again", dir, port)
	l = startLoader(t, args...)
	if code := l.exit(t, 3*time.Minute); code != 0 {
		t.Fatalf("second run: exit %d, want 0", code)
	}
	second := l.stdout.String()
	if summaryValue(second, "unchanged") == 0 || summaryValue(second, "loaded")+summaryValue(second, "unchanged") != c.Len() {
		t.Errorf("second run: want the rest loaded and the pages of the first run unchanged:\n%s", second)
	}
	verifyIndex(t, ctx, dir, port, c)
}

// Two runners share a data directory, the second joined to the first. When
// the owner is killed mid-load, the other takes the directory over, and
// the loader carries on by itself: the load completes and the index equals
// a from-scratch computation.
func TestRunnerTakesOverFromDeadOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, port := t.TempDir(), freePort(t)
	c, pagesDir := corpus(t, 400)
	owner := startRunner(t, "owner", dir, port)
	client(t, ctx, dir, port) // returns once the owner serves
	// At info level it says when it has started (a worker in the list of
	// workers may still be starting).
	joiner := startRunner(t, "joiner", dir, port, "-log-level", "info")
	for deadline := time.Now().Add(time.Minute); !joiner.logged("runner started"); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second runner did not start")
		}
	}
	l := startLoader(t, "-dir", pagesDir, "-base-url", c.BaseURL(), "-data", dir)
	l.inMidLoad(t)
	owner.kill()
	if code := l.exit(t, 3*time.Minute); code != 0 {
		t.Fatalf("loader: exit %d after the owner died, want 0 (the other runner takes over)", code)
	}
	if !joiner.logged("took over the data directory") {
		t.Error("the second runner did not say it took over")
	}
	// A batch whose commit answer was lost in the kill may have committed:
	// its retry finds its pages unchanged.
	if n := summaryValue(l.stdout.String(), "loaded") + summaryValue(l.stdout.String(), "unchanged"); n != c.Len() {
		t.Errorf("loaded or found unchanged %d pages, want %d", n, c.Len())
	}
	verifyIndex(t, ctx, dir, port, c)
}
