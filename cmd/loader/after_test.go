package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/runner"
)

// After a loader wrote into a data directory no runner served, a command
// on that directory (runner status, wait, scan: a client) is not kept
// waiting for the loader, which has ended, and dials no server: it fails
// at once, naming the directory and what to do.
func TestClientAfterALoaderDoesNotWait(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	feed := writeFile(t, filepath.Join(dir, "feed.jsonl"), fmt.Sprintf(`{"url":"http://x.example/","html":%q}`+"\n", page("X")))
	cmd := exec.Command(os.Args[0], "-data", data, "-log-level", "warn", feed)
	cmd.Env = append(os.Environ(), "TRICKLE_TEST_LOADER=1", "GORACE=atexit_sleep_ms=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("loader: %v\n%s", err, out)
	}
	const patience = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*patience)
	defer cancel()
	began := time.Now()
	node, err := runner.Open(ctx, runner.Deployment{Mode: runner.ModeClient, DataDir: data, ConnectTimeout: patience, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		node.Close()
		t.Fatal("a client joined a data directory no runner serves")
	}
	want := fmt.Sprintf("no runner serves the data directory %s: its last owner, pid %d, ran on this host since its last boot and is not running any more; start a runner with -data %s", data, cmd.Process.Pid, data)
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Open: %v\nwant it to say %q", err, want)
	}
	if d := time.Since(began); d >= patience {
		t.Errorf("Open waited %v for a loader that ended", d)
	}
}
