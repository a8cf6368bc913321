// Package pgtest runs a throwaway PostgreSQL server for tests: initdb in
// a temporary directory, the server on a free TCP port of 127.0.0.1, and
// everything removed when the test ends. Tests of code that talks to
// PostgreSQL need a real server, and this one costs about a second.
//
// The server's binaries (initdb, postgres) are looked for on PATH, in
// /usr/local/bin, then in /usr/lib/postgresql/*/bin; Start skips the test
// when there are none. PostgreSQL refuses to run as root, so under root
// the server runs as the user nobody, in a directory that user owns.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoServer is returned by New when no PostgreSQL binaries are found.
var ErrNoServer = errors.New("pgtest: no PostgreSQL server binaries (initdb, postgres) found on PATH, in /usr/local/bin or /usr/lib/postgresql/*/bin")

// startTimeout bounds a server's start: initdb, or the wait until it
// accepts connections.
const startTimeout = 30 * time.Second

// Server is a PostgreSQL server of a test. Its superuser is "postgres",
// trusted without a password from 127.0.0.1.
type Server struct {
	bin  string // the directory of initdb and postgres
	dir  string // the temporary directory: data/ and server.log
	port int
	cred *syscall.Credential // whom the server runs as; nil: this process's user
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Start starts a server for t and stops and removes it when t ends; it
// skips t when no server binaries are found.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New()
	if errors.Is(err, ErrNoServer) {
		t.Skip(err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// New initializes a database cluster in a new temporary directory and
// starts a server on it. Close stops it and removes the directory.
func New() (*Server, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir}
	if err := s.init(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		if s.port, err = freePort(); err == nil {
			if err = s.Start(); err == nil {
				return s, nil
			}
		}
		if attempt == 2 { // another process may have taken the free port meanwhile
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// Find returns the directory holding initdb and postgres, or ErrNoServer.
func Find() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	dirs = append(dirs, "/usr/local/bin")
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versions, func(a, b string) int { return version(b) - version(a) }) // the newest first
	for _, d := range append(dirs, versions...) {
		initdb, err := filepath.EvalSymlinks(filepath.Join(d, "initdb"))
		if err != nil {
			continue
		}
		// postgres is initdb's sibling once symbolic links are resolved.
		bin := filepath.Dir(initdb)
		if _, err := os.Stat(filepath.Join(bin, "postgres")); err == nil {
			return bin, nil
		}
	}
	return "", ErrNoServer
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// init runs initdb into dir/data, as nobody under root.
func (s *Server) init() error {
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return fmt.Errorf("pgtest: running as root, and PostgreSQL does not: no user nobody to run it as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chmod(s.dir, 0o755); err != nil {
			return err
		}
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "initdb"), "-D", s.data(), "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb in %s: %w\n%s", s.dir, err, out)
	}
	return nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) logPath() string { return filepath.Join(s.dir, "server.log") }

// Start starts the server again after Stop, on the same port and data.
func (s *Server) Start() error {
	if s.cmd != nil {
		return errors.New("pgtest: the server is running")
	}
	log, err := os.OpenFile(s.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	// Surviving a power cut is of no use to a test: no fsync, no full page
	// writes. A commit still reaches the write-ahead log before it is
	// acknowledged (synchronous_commit stays on), so Crash loses nothing
	// committed.
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data(), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=", "-c", "fsync=off",
		"-c", "full_page_writes=off", "-c", "max_connections=50")
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(s.done)
	if err := s.waitReady(); err != nil {
		s.signal(syscall.SIGQUIT)
		return fmt.Errorf("%w\n%s", err, s.logTail())
	}
	return nil
}

// waitReady waits until the server answers a connection.
func (s *Server) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgconn.Connect(ctx, s.DSN())
		cancel()
		if err == nil {
			return c.Close(context.Background())
		}
		select {
		case <-s.done:
			return fmt.Errorf("pgtest: postgres on port %d exited while starting", s.port)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres on port %d not ready within %v: %w", s.port, startTimeout, err)
		}
		time.Sleep(20 * time.Millisecond) // polling for the server to accept connections
	}
}

// Stop shuts the server down the fast way: open transactions are rolled
// back and their connections closed, as a restart does to its clients.
func (s *Server) Stop() error { return s.signal(syscall.SIGINT) }

// Crash stops the server the immediate way, without a checkpoint: the
// next Start recovers from the write-ahead log, as after a power cut.
func (s *Server) Crash() error { return s.signal(syscall.SIGQUIT) }

// Restart stops the server and starts it again.
func (s *Server) Restart() error {
	if err := s.Stop(); err != nil {
		return err
	}
	return s.Start()
}

// signal asks the server to stop with sig and waits until it exited,
// killing it if it takes too long.
func (s *Server) signal(sig syscall.Signal) error {
	if s.cmd == nil {
		return nil
	}
	defer func() { s.cmd = nil }()
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pgtest: stopping postgres: %w", err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(startTimeout):
		s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("pgtest: postgres did not stop within %v\n%s", startTimeout, s.logTail())
	}
}

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	err := s.Stop()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// Host is the address the server listens on, host:port.
func (s *Server) Host() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

// DSN is a connection string to the server's postgres database as its
// superuser.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", s.Host())
}

// logTail is the end of the server's log, for errors.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.logPath())
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// freePort returns a TCP port of 127.0.0.1 nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
