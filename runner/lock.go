package runner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// errOwned means another process owns the data directory.
var errOwned = errors.New("runner: the data directory is owned by another runner")

// dirLock is an exclusive advisory lock on a data directory, released by
// the kernel if the process dies.
type dirLock struct{ f *os.File }

func lockDir(dir string) (*dirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "OWNER")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errOwned
		}
		return nil, fmt.Errorf("runner: locking %s: %w", path, err)
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	return &dirLock{f: f}, nil
}

func (l *dirLock) release() error {
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return l.f.Close()
}
