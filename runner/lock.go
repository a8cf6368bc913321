package runner

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// errOwned means another process owns the data directory.
var errOwned = errors.New("runner: the data directory is owned by another process")

// ownerFile is the data directory's lock file. Its owner writes its pid and,
// once it serves the store, the NATS URL it serves it on: local clients
// read where to connect there. The host name and boot id that follow say
// where the pid is meaningful, so that a client on the same host and boot
// can tell a dead owner from a slow one.
const ownerFile = "OWNER"

// dirLock is an exclusive advisory lock on a data directory, released by
// the kernel if the process dies.
type dirLock struct{ f *os.File }

// lockDir takes the data directory's lock without waiting, creating the
// directory (private to its user: it holds the store's data and the NATS
// credentials) if needed.
func lockDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("runner: data directory: %w", err)
	}
	path := filepath.Join(dir, ownerFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("runner: data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errOwned
		}
		return nil, fmt.Errorf("runner: locking %s: %w", path, err)
	}
	l := &dirLock{f: f}
	if err := l.announce(""); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

// announce records this process as the owner, serving on url ("" while it
// serves nothing).
func (l *dirLock) announce(url string) error {
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("runner: writing %s: %w", l.f.Name(), err)
	}
	if _, err := l.f.WriteAt([]byte(ownerRecord(os.Getpid(), url)), 0); err != nil {
		return fmt.Errorf("runner: writing %s: %w", l.f.Name(), err)
	}
	return nil
}

// ownerRecord is what the lock file says of an owner with pid on this
// host, serving on url.
func ownerRecord(pid int, url string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%d\n%s\n%s\n%s\n", pid, url, host, bootID())
}

func (l *dirLock) release() error {
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return l.f.Close()
}

// ownerInfo is what the lock file of a data directory says about its
// latest owner.
type ownerInfo struct {
	pid   int
	url   string // where it serves the store; "" if it does not
	alive bool   // whether a process with that pid exists
	// host and boot are where the owner ran: its host name and the boot
	// id of that host's kernel ("" if it recorded none).
	host, boot string
}

// gone reports whether the owner is known to have ended: it ran on this
// host since its last boot, and no process has its pid. A record from
// another host, or one that does not say, is not known to be gone.
func (o ownerInfo) gone() bool {
	host, _ := os.Hostname()
	return !o.alive && o.host != "" && o.host == host && o.boot != "" && o.boot == bootID()
}

// bootID is the boot id of this host's kernel, "" where there is none: a
// pid names the same process only within one boot.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// readOwner reads the data directory's lock file without taking the lock.
// It reports ok=false if there is none or it cannot be read.
func readOwner(dir string) (ownerInfo, bool) {
	f, err := os.Open(filepath.Join(dir, ownerFile))
	if err != nil {
		return ownerInfo{}, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var lines []string
	for sc.Scan() && len(lines) < 4 {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	if len(lines) == 0 {
		return ownerInfo{}, false
	}
	pid, err := strconv.Atoi(lines[0])
	if err != nil || pid <= 0 {
		return ownerInfo{}, false
	}
	err = syscall.Kill(pid, 0)
	o := ownerInfo{pid: pid, alive: err == nil || errors.Is(err, syscall.EPERM)}
	lines = append(lines, "", "", "")
	o.url, o.host, o.boot = lines[1], lines[2], lines[3]
	return o, true
}

// describe says who owns the data directory, for error messages.
func (o ownerInfo) describe() string {
	switch {
	case !o.alive:
		return fmt.Sprintf("its last owner, pid %d, is not running", o.pid)
	case o.url == "":
		return fmt.Sprintf("its owner, pid %d, does not serve it (a loader writing into it directly, or a runner starting up)", o.pid)
	}
	return fmt.Sprintf("its owner, pid %d, announced %s", o.pid, o.url)
}
