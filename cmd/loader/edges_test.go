package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/runner"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Naming a NATS URL makes the loader a client: when nothing answers there
// it fails, naming the URL, and never writes into a store of its own.
func TestNATSURLMakesAClient(t *testing.T) {
	t.Chdir(t.TempDir())
	feed := writeFile(t, "feed.jsonl", fmt.Sprintf(`{"url":"http://x.example/","html":%q}`+"\n", page("X")))
	url := fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
	code, _, errOut := load(t, "-nats", url, "-connect-timeout", "1s", feed)
	if code != exitFatal || !strings.Contains(errOut, "no store answers on "+url) {
		t.Fatalf("exit %d, stderr %q; want 1 and an error naming %s", code, errOut, url)
	}
	if _, err := os.Stat("data"); !os.IsNotExist(err) {
		t.Fatalf("the loader created ./data (%v): it fell back to a store of its own", err)
	}
}

// A loader pointed at the port of another deployment than its data
// directory's refuses to write there, naming both stores.
func TestWrongStoreIsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := func(dir string) *runner.Runner {
		reg := framework.NewRegistry()
		if err := webindex.Register(reg); err != nil {
			t.Fatal(err)
		}
		r, err := runner.Start(ctx, runner.Config{DataDir: dir, NATSPort: -1, HTTPAddr: "off", Logger: quiet}, reg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a, b := start(dirA), start(dirB)
	feed := writeFile(t, filepath.Join(t.TempDir(), "feed.jsonl"), fmt.Sprintf(`{"url":"http://x.example/","html":%q}`+"\n", page("X")))
	portB := strings.TrimPrefix(b.Node.URL(), "nats://127.0.0.1:")
	// Each data directory has its own key: B's server refuses A's.
	code, _, errOut := load(t, "-data", dirA, "-nats-port", portB, feed)
	if code != exitFatal || !strings.Contains(errOut, "refused the key of data directory "+dirA) || !strings.Contains(errOut, a.Node.StoreID()) {
		t.Fatalf("exit %d, stderr %q; want 1 and an error saying B's server refused A's key", code, errOut)
	}
	// With B's key (its data directory) but A's store expected by id, the
	// store answers and is found to be the wrong one.
	code, _, errOut = load(t, "-data", dirB, "-nats-port", portB, "-store-id", a.Node.StoreID(), feed)
	if code != exitFatal || !strings.Contains(errOut, a.Node.StoreID()) || !strings.Contains(errOut, b.Node.StoreID()) {
		t.Fatalf("exit %d, stderr %q; want 1 and an error naming stores %s and %s", code, errOut, a.Node.StoreID(), b.Node.StoreID())
	}
	for _, r := range []*runner.Runner{a, b} {
		tables, err := runner.Tables(ctx, r.Node)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			if tb == webindex.PagesTable {
				t.Fatalf("a page was written into %s", r.Node.Config().DataDir)
			}
		}
	}
	// The right port works.
	portA := strings.TrimPrefix(a.Node.URL(), "nats://127.0.0.1:")
	if code, _, _ := load(t, "-data", dirA, "-nats-port", portA, feed); code != exitOK {
		t.Fatalf("loading into the right store: exit %d", code)
	}
}
