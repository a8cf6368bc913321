package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/store"
)

// deadPid returns the pid of a process that has ended.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// writeOwner writes the lock file of dir as an owner would, without
// holding the lock: the record a process left when it ended.
func writeOwner(t *testing.T, dir, record string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(record), 0o600); err != nil {
		t.Fatal(err)
	}
}

// recorder is a listener that counts the connections made to it: a
// server a client must not dial.
type recorder struct{ ln net.Listener }

func listenRecording(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return &recorder{ln}
}

func (r *recorder) url() string { return "nats://" + r.ln.Addr().String() }

// dialled returns how many connections were made so far: it makes one of
// its own and accepts until it comes, the connections queued before it
// being the others'.
func (r *recorder) dialled(t *testing.T) int {
	t.Helper()
	marker, err := net.Dial("tcp", r.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	for n := 0; ; n++ {
		c, err := r.ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if c.RemoteAddr().String() == marker.LocalAddr().String() {
			return n
		}
	}
}

// A client is not kept waiting for an owner known to have ended: one that
// ran on this host since its last boot and whose pid no process has. Nor
// does it dial the URL that owner recorded, where another server may
// listen now.
func TestClientDoesNotWaitForAGoneOwner(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	pid := deadPid(t)
	other := listenRecording(t)
	writeOwner(t, dir, ownerRecord(pid, other.url()))
	// The key the owner made, which a client would offer.
	if _, err := cluster.LocalCredentials(dir); err != nil {
		t.Fatal(err)
	}
	if o, ok := readOwner(dir); !ok || !o.gone() {
		t.Fatalf("record of ended pid %d: %+v, gone %v; want gone", pid, o, o.gone())
	}
	const patience = 30 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*patience)
	defer cancel()
	began := time.Now()
	_, err := Open(ctx, Deployment{Mode: ModeClient, DataDir: dir, ConnectTimeout: patience, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		t.Fatal("Open succeeded with no owner")
	}
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("its last owner, pid %d, ran on this host since its last boot and is not running", pid)) {
		t.Errorf("Open: %v; want an error saying the owner ended", err)
	}
	if !strings.Contains(err.Error(), "no runner serves the data directory "+dir) || !strings.Contains(err.Error(), "start a runner with -data "+dir) {
		t.Errorf("Open: %v; want it to name the data directory and what to do", err)
	}
	if d := time.Since(began); d >= patience {
		t.Errorf("Open waited %v for an owner that ended", d)
	}
	if n := other.dialled(t); n > 0 {
		t.Errorf("Open dialled the URL an ended owner recorded %d times", n)
	}
}

// An owner recorded on another host, or by a process that recorded no
// host, may be alive for all this one can tell: it is waited for, and the
// error then names the data directory, since nothing named a URL.
func TestClientWaitsForAnOwnerItCannotCheck(t *testing.T) {
	pid := deadPid(t)
	for name, record := range map[string]string{
		"another host": fmt.Sprintf("%d\n\nsomewhere-else\n%s\n", pid, bootID()),
		"no host":      fmt.Sprintf("%d\n\n", pid),
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			writeOwner(t, dir, record)
			if o, _ := readOwner(dir); o.gone() {
				t.Fatalf("record %q: gone", record)
			}
			_, err := Open(context.Background(), Deployment{Mode: ModeClient, DataDir: dir, ConnectTimeout: 300 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			want := fmt.Sprintf("runner: no runner serves the data directory %s (tried for 300ms): its last owner, pid %d, is not running (data directory %s); start a runner with -data %s", dir, pid, dir, dir)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open: %v\nwant it to say %q", err, want)
			}
		})
	}
}

// A local client dials only a server something named: the configured URL
// or port, or the one the data directory's owner announced. With none of
// them (no owner yet, or one that serves nothing, as a loader writing
// into the directory directly) there is no URL to dial, in particular not
// the default port, where another deployment's server may listen.
func TestClientURLIsOnlyWhatWasNamed(t *testing.T) {
	dir := t.TempDir()
	d := Deployment{DataDir: dir}
	if url := d.clientURL(); url != "" {
		t.Errorf("no owner record: client URL %q, want none", url)
	}
	writeOwner(t, dir, ownerRecord(os.Getpid(), ""))
	if url := d.clientURL(); url != "" {
		t.Errorf("an owner serving nothing: client URL %q, want none", url)
	}
	writeOwner(t, dir, ownerRecord(os.Getpid(), "nats://127.0.0.1:5"))
	if url := d.clientURL(); url != "nats://127.0.0.1:5" {
		t.Errorf("an owner serving on nats://127.0.0.1:5: client URL %q", url)
	}
	d.NATSPort = 6
	if url := d.clientURL(); url != "nats://127.0.0.1:6" {
		t.Errorf("-nats-port 6: client URL %q", url)
	}
	d.NATSURL = "nats://elsewhere:7"
	if url := d.clientURL(); url != "nats://elsewhere:7" {
		t.Errorf("-nats nats://elsewhere:7: client URL %q", url)
	}
}
