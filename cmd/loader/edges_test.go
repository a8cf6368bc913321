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
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
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

// startIndexRunner starts a runner of the web index on the data directory
// dir, running its observers until the test ends.
func startIndexRunner(t *testing.T, ctx context.Context, dir string) *runner.Runner {
	t.Helper()
	reg := framework.NewRegistry()
	if err := webindex.Register(reg); err != nil {
		t.Fatal(err)
	}
	r, err := runner.Start(ctx, runner.Config{Deployment: runner.Deployment{DataDir: dir, NATSPort: -1, Logger: quiet}, HTTPAddr: "off"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		<-done
		r.Close()
	})
	return r
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
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a, b := startIndexRunner(t, ctx, dirA), startIndexRunner(t, ctx, dirB)
	feed := writeFile(t, filepath.Join(t.TempDir(), "feed.jsonl"), fmt.Sprintf(`{"url":"http://x.example/","html":%q}`+"\n", page("X")))
	portB := strings.TrimPrefix(b.Node().URL(), "nats://127.0.0.1:")
	// Each data directory has its own key: B's server refuses A's.
	code, _, errOut := load(t, "-data", dirA, "-nats-port", portB, feed)
	if code != exitFatal || !strings.Contains(errOut, "the NATS server at "+b.Node().URL()+" refused the key of data directory "+dirA) || !strings.Contains(errOut, a.Node().StoreID()) {
		t.Fatalf("exit %d, stderr %q; want 1 and an error saying B's server refused A's key", code, errOut)
	}
	// With B's key (its data directory) but A's store expected by id, the
	// store answers and is found to be the wrong one.
	code, _, errOut = load(t, "-data", dirB, "-nats-port", portB, "-store-id", a.Node().StoreID(), feed)
	if code != exitFatal || !strings.Contains(errOut, a.Node().StoreID()) || !strings.Contains(errOut, b.Node().StoreID()) {
		t.Fatalf("exit %d, stderr %q; want 1 and an error naming stores %s and %s", code, errOut, a.Node().StoreID(), b.Node().StoreID())
	}
	for _, r := range []*runner.Runner{a, b} {
		tables, err := runner.Tables(ctx, r.Node())
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range tables {
			if tb == schema.PagesTable {
				t.Fatalf("a page was written into %s", r.Node().Deployment().DataDir)
			}
		}
	}
	// The right port works.
	portA := strings.TrimPrefix(a.Node().URL(), "nats://127.0.0.1:")
	if code, _, _ := load(t, "-data", dirA, "-nats-port", portA, feed); code != exitOK {
		t.Fatalf("loading into the right store: exit %d", code)
	}
}

// bigPage is an HTML page of about size bytes whose text holds word.
func bigPage(title, word string, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<html><title>%s</title><body><p>%s</p>", title, word)
	for b.Len() < size {
		b.WriteString("<p>a paragraph of a long page about nothing in particular</p>\n")
	}
	b.WriteString("</body></html>")
	return b.String()
}

// Every page the loader accepts (up to -max-body) loads through a runner
// over a NATS server with the default 1 MiB max payload; a page over
// -max-body is reported as too large, not as failed.
func TestLargePagesThroughRunner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	data := filepath.Join(t.TempDir(), "data")
	r := startIndexRunner(t, ctx, data)
	if mp := r.Node().Conn().MaxPayload(); mp > 1<<20 {
		t.Fatalf("the embedded server allows %d-byte messages; the test needs the default 1 MiB", mp)
	}

	dir := t.TempDir()
	big := bigPage("Big", "zeppelin", 6<<20)
	huge := bigPage("Huge", "dirigible", 11<<20)
	feed := writeFile(t, filepath.Join(dir, "feed.jsonl"), fmt.Sprintf("{\"url\":\"http://big.example/\",\"html\":%q}\n{\"url\":\"http://huge.example/\",\"html\":%q}\n", big, huge))
	code, out, errOut := load(t, "-data", data, feed)
	if code != exitBad {
		t.Fatalf("exit %d, want 2 (one page too large)", code)
	}
	wantSummary(t, out, map[string]string{"loaded": "1", "bad": "1", "failed": "0"})
	if !strings.Contains(out, "too-large 1") || !strings.Contains(errOut, "reason=too-large") || !strings.Contains(errOut, "line=2") {
		t.Errorf("the page over -max-body is not reported as too large:\n%s\n%s", out, errOut)
	}
	// Loading it again reads the 6 MB document back over NATS to compare.
	if code, out, _ := load(t, "-data", data, "-max-body", "20m", feed); code != exitOK {
		t.Fatalf("second load with -max-body 20m: exit %d", code)
	} else {
		wantSummary(t, out, map[string]string{"loaded": "1", "unchanged": "1"})
	}
	if stuck, err := runner.Wait(ctx, r.Node(), runner.WaitOptions{Poll: 20 * time.Millisecond}); err != nil || len(stuck) > 0 {
		t.Fatalf("wait: %v %v", stuck, err)
	}
	ix, _ := webindex.New(nil)
	for _, word := range []string{"zeppelin", "dirigible"} {
		if total, _, err := ix.Search(ctx, r.DB(), word, 10); err != nil || total != 1 {
			t.Errorf("search %q: %d results, %v; want the large page", word, total, err)
		}
	}
}
