package oracle

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Environment of the re-executed child in TestKill9.
const (
	killFileEnv  = "ORACLE_KILL9_FILE"  // the FilePersister path
	killCountEnv = "ORACLE_KILL9_COUNT" // timestamps to print; 0 = until killed
	killSkewEnv  = "ORACLE_KILL9_SKEW"  // clock offset, a time.Duration
)

// TestKill9Child is not a test on its own: TestKill9 runs the test binary
// again with only this test selected and the environment set. It serves
// timestamps from a FilePersister and prints each one after Reserve returns
// it, flushing every few lines.
func TestKill9Child(t *testing.T) {
	path := os.Getenv(killFileEnv)
	if path == "" {
		t.Skip("only runs as the child of TestKill9")
	}
	count, _ := strconv.Atoi(os.Getenv(killCountEnv))
	skew, _ := time.ParseDuration(os.Getenv(killSkewEnv))
	clock := func() time.Time { return time.Now().Add(skew) }
	// A 1ms window makes the child Save about every millisecond, so the kill
	// is likely to land during or right after a Save.
	s, err := NewServer(NewFilePersister(path), &ServerOptions{Logger: quiet, Window: time.Millisecond, Clock: clock})
	if err != nil {
		fmt.Fprintln(os.Stdout, "error", err)
		os.Exit(2)
	}
	w := bufio.NewWriterSize(os.Stdout, 512)
	for i := 0; count == 0 || i < count; i++ {
		ts, err := s.Reserve(context.Background(), 1+i%3)
		if err != nil {
			fmt.Fprintln(w, "error", err)
			w.Flush()
			os.Exit(2)
		}
		// Printing only after Reserve returned: every printed value was served.
		fmt.Fprintf(w, "ts %d %d\n", ts, 1+i%3)
		if i%4 == 0 {
			w.Flush() // small writes (< PIPE_BUF) stay atomic when killed
		}
	}
	w.Flush()
	os.Exit(0) // skip the test framework's own output
}

// killAfter is how many lines TestKill9 reads before killing the child.
const killAfter = 2000

// startChild runs TestKill9Child and returns its stdout.
func startChild(t *testing.T, path string, count int, skew time.Duration) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), killFileEnv+"="+path, killCountEnv+"="+strconv.Itoa(count), killSkewEnv+"="+skew.String(),
		// Under -race the runtime otherwise sleeps a second at exit.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewReader(out)
}

// parseLine returns the last timestamp of the range a child line reports.
func parseLine(t *testing.T, line string) uint64 {
	t.Helper()
	var ts, n uint64
	if _, err := fmt.Sscanf(line, "ts %d %d\n", &ts, &n); err != nil {
		t.Fatalf("child printed %q", line)
	}
	return ts + n - 1
}

func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	path := filepath.Join(t.TempDir(), "tso")
	start := time.Now()

	// The first child's clock is an hour fast and the second's is right, so
	// only what the first one persisted can keep the second above it.
	child, out := startChild(t, path, 0, time.Hour)
	var maxServed uint64
	seen := 0
	for ; seen < killAfter; seen++ {
		line, err := out.ReadString('\n')
		if err != nil {
			child.Wait()
			t.Fatalf("child stopped after %d lines: %v", seen, err)
		}
		maxServed = max(maxServed, parseLine(t, line))
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// Everything the child printed before dying counts, including lines
	// still sitting in the pipe. A torn last line (no newline) would have
	// been printed after its Reserve returned, but writes are smaller than
	// PIPE_BUF so it cannot happen; it is ignored rather than misparsed.
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			break
		}
		maxServed = max(maxServed, parseLine(t, line))
		seen++
	}
	err := child.Wait()
	if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("first child was not killed by SIGKILL: %v", err)
	}

	child2, out2 := startChild(t, path, 1, 0)
	line, err := out2.ReadString('\n')
	if err != nil {
		t.Fatalf("second child printed %q: %v", line, err)
	}
	var first, n uint64
	if _, err := fmt.Sscanf(line, "ts %d %d\n", &first, &n); err != nil {
		t.Fatalf("second child printed %q", line)
	}
	if err := child2.Wait(); err != nil {
		t.Fatalf("second child: %v", err)
	}
	if first <= maxServed {
		t.Fatalf("after kill -9 the oracle served %d, not above %d served before", first, maxServed)
	}
	t.Logf("first child printed %d lines up to %d (killed after %v); second child started at %d (total %v)",
		seen, maxServed, killed.Sub(start), first, time.Since(start))
}
