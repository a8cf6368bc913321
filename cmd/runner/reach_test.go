package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/runner"
)

// status on a data directory whose owner serves nothing (a loader writing
// into it directly) dials no server: nothing named one, and the default
// port may be another deployment's. It fails naming the data directory and
// its owner.
func TestStatusOnALoadersDirectoryDialsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "data")
	// What the loader opens when no runner owns the directory.
	ld, err := runner.Open(ctx, runner.Deployment{DataDir: dir, Private: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer ld.Close()
	code, _, errOut := runCmd(t, "status", "-data", dir, "-connect-timeout", "300ms")
	if code != 1 || !strings.Contains(errOut, "no runner serves the data directory "+dir+" (tried for 300ms)") || !strings.Contains(errOut, "does not serve it (a loader writing into it directly") {
		t.Errorf("status: exit %d, stderr %q; want an error naming the data directory and its owner", code, errOut)
	}
	if strings.Contains(errOut, "nats://") {
		t.Errorf("status dialled a server nothing named: %q", errOut)
	}
}

// A client refused by the server it reached names that server's URL:
// there, the server of another data directory.
func TestRefusedKeyNamesTheServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := func(dir string) *runner.Runner {
		r, err := runner.Start(ctx, runner.Config{Deployment: runner.Deployment{DataDir: dir, NATSPort: -1, Logger: slog.New(slog.DiscardHandler)}, HTTPAddr: "off"}, framework.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	start(dirA)
	b := start(dirB)
	url := b.Node().URL()
	port := strings.TrimPrefix(url, "nats://127.0.0.1:")
	code, _, errOut := runCmd(t, "status", "-data", dirA, "-nats-port", port)
	if want := "the NATS server at " + url + " refused the key of data directory " + dirA; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("status with another directory's port: exit %d, stderr %q; want it to say %q", code, errOut, want)
	}
}
