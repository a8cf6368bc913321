package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/pipelines/wordcount"
	"github.com/trickle-dev/trickle/runner"
)

// TestMain lets the test binary stand in for the runner binary: the
// process tests start it with TRICKLE_TEST_RUNNER=1 and the runner's
// arguments, and it runs main's code.
func TestMain(m *testing.M) {
	if os.Getenv("TRICKLE_TEST_RUNNER") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// proc is a runner process.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned

	mu    sync.Mutex
	lines []string // what it logged
}

// logged reports whether the process logged a line containing s.
func (p *proc) logged(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// startRunner starts a runner process; extra flags override the defaults.
func startRunner(t *testing.T, name, dir string, port int, extra ...string) *proc {
	t.Helper()
	args := []string{"-data", dir, "-nats-port", fmt.Sprint(port), "-worker-id", name,
		"-http", "127.0.0.1:0", "-workers", "8", "-scanners", "2", "-liveness-ttl", "2s", "-lock-ttl", "3s", "-log-level", "warn"}
	cmd := exec.Command(os.Args[0], append(args, extra...)...)
	cmd.Env = append(os.Environ(), "TRICKLE_TEST_RUNNER=1", "GORACE=atexit_sleep_ms=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Logf("[%s] %s", name, sc.Text())
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill kills the process, if it still runs, and waits until it is gone.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL) // os.ErrProcessDone once it has ended
	<-p.exited
}

// client connects to the deployment like the loader does: over NATS, with
// the observed columns the runners published.
func client(t *testing.T, ctx context.Context, dir string, port int) (*runner.Node, *framework.DB) {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var node *runner.Node
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		node, err = runner.Open(ctx, runner.Deployment{Mode: runner.ModeClient, DataDir: dir, NATSPort: port, Logger: quiet})
		if err == nil {
			var db *framework.DB
			if db, err = node.OpenDB(ctx, nil); err == nil {
				t.Cleanup(func() { node.Close() })
				return node, db
			}
			node.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no runner to connect to: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProcessesSurviveKill9 runs two runner processes on one store (the
// first owns it and serves it over NATS, the second joins over NATS), loads
// documents from a third process, kills the joining runner with SIGKILL in
// the middle of the work, then kills and restarts the owner as well, and
// checks that the word counts are exactly what counting the corpus from
// scratch gives: nothing lost, nothing counted twice.
func TestProcessesSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir, port := t.TempDir(), freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	owner := startRunner(t, "owner", dir, port)
	node, db := client(t, ctx, dir, port)
	pending := func() int {
		n, err := admin.Pending(ctx, node.Store(), []string{wordcount.DocsTable})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	joiner := startRunner(t, "joiner", dir, port)

	vocab := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu")
	rng := rand.New(rand.NewPCG(7, 7))
	docs := map[string]string{}
	load := func(n int) {
		for range n {
			id := fmt.Sprintf("doc%03d", rng.IntN(150))
			var b strings.Builder
			for range 1 + rng.IntN(8) {
				b.WriteString(vocab[rng.IntN(len(vocab))] + " ")
			}
			if err := wordcount.Put(ctx, db, id, b.String()); err != nil {
				t.Fatalf("loading %s: %v", id, err)
			}
			docs[id] = b.String()
		}
	}
	load(150)
	t.Logf("killing the joining runner with %d notifications pending", pending())
	joiner.kill()
	load(100)
	t.Logf("killing the owner with %d notifications pending", pending())
	owner.kill()

	// The owner comes back; the client's NATS connection reconnects to it.
	startRunner(t, "owner-again", dir, port)
	node, db = client(t, ctx, dir, port)
	load(50)
	stuck, err := runner.Wait(ctx, node, runner.WaitOptions{Poll: 50 * time.Millisecond})
	if err != nil || len(stuck) > 0 {
		t.Fatalf("wait: %v, stuck %v", err, stuck)
	}
	want := map[string]int{}
	for _, text := range docs {
		for _, w := range wordcount.Words(text) {
			want[w]++
		}
	}
	got, err := wordcount.Counts(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("%q counted %d, want %d", w, got[w], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("counted %d words, want %d", len(got), len(want))
	}
}
