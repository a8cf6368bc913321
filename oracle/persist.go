package oracle

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// ErrCorrupt is wrapped by FilePersister.Load when the file exists but does
// not hold a valid record. Loading must never fall back to 0 in that case:
// the oracle would then re-serve timestamps it had already handed out.
var ErrCorrupt = errors.New("corrupt timestamp file")

// fileMagic identifies (and versions) the on-disk record.
var fileMagic = [4]byte{'T', 'S', 'O', '1'}

// recordLen is magic(4) + big-endian top(8) + CRC-32 IEEE of both(4).
const recordLen = 16

// FilePersister stores the oracle's top in a small checksummed file. Save
// replaces the file atomically (write temp, fsync, rename, fsync directory),
// so after a crash the file holds either the old or the new top, never a
// mix. It is safe for concurrent use within one process; two processes must
// not share a file.
type FilePersister struct {
	path string
	mu   sync.Mutex // serializes Saves, which share one temp file
}

// NewFilePersister returns a FilePersister for path. The file and its
// directory need not exist yet, but the directory must be creatable when
// Save runs.
func NewFilePersister(path string) *FilePersister {
	return &FilePersister{path: path}
}

// Path returns the file path, for logs and error messages.
func (f *FilePersister) Path() string { return f.path }

// Load returns the saved top, 0 if the file does not exist, or an error
// wrapping ErrCorrupt and naming the file if it cannot be trusted.
func (f *FilePersister) Load() (uint64, error) {
	b, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("oracle: read timestamp file: %w", err)
	}
	corrupt := func(why string) error {
		return fmt.Errorf("oracle: %s: %w: %s", f.path, ErrCorrupt, why)
	}
	if len(b) != recordLen {
		return 0, corrupt(fmt.Sprintf("length %d, want %d", len(b), recordLen))
	}
	if [4]byte(b[:4]) != fileMagic {
		return 0, corrupt(fmt.Sprintf("bad magic %q", b[:4]))
	}
	if got, want := binary.BigEndian.Uint32(b[12:]), crc32.ChecksumIEEE(b[:12]); got != want {
		return 0, corrupt(fmt.Sprintf("checksum %08x, want %08x", got, want))
	}
	top := binary.BigEndian.Uint64(b[4:12])
	if top > MaxTimestamp {
		return 0, corrupt(fmt.Sprintf("top %d exceeds MaxTimestamp", top))
	}
	return top, nil
}

// Save durably replaces the stored top. It returns only once the new file
// and the directory entry pointing at it are on stable storage.
func (f *FilePersister) Save(top uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b [recordLen]byte
	copy(b[:4], fileMagic[:])
	binary.BigEndian.PutUint64(b[4:12], top)
	binary.BigEndian.PutUint32(b[12:], crc32.ChecksumIEEE(b[:12]))

	dir := filepath.Dir(f.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("oracle: save %s: %w", f.path, err)
	}
	// A fixed temp name means a crash mid-Save leaves at most one stale
	// temp file, which the next Save truncates.
	tmp := f.path + ".tmp"
	if err := writeSync(tmp, b[:]); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("oracle: save %s: %w", f.path, err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("oracle: save %s: %w", f.path, err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("oracle: save %s: sync directory: %w", f.path, err)
	}
	return nil
}

func writeSync(path string, b []byte) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := fh.Write(b); err != nil {
		fh.Close()
		return err
	}
	if err := fh.Sync(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// MemPersister keeps the top in memory. It is meant for tests and for
// embedding the oracle where durability comes from elsewhere; it survives a
// Server being dropped (a simulated crash) but not the process. Save
// failures can be injected with FailSaves.
type MemPersister struct {
	mu      sync.Mutex
	top     uint64
	saves   int
	saveErr error
}

// NewMemPersister returns a MemPersister whose Load returns top, as if top
// had been saved earlier.
func NewMemPersister(top uint64) *MemPersister { return &MemPersister{top: top} }

// Load returns the last successfully saved top.
func (m *MemPersister) Load() (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.top, nil
}

// Save records top, or returns the injected error without recording it.
func (m *MemPersister) Save(top uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.saveErr != nil {
		return m.saveErr
	}
	m.top = top
	m.saves++
	return nil
}

// FailSaves makes every later Save return err (nil restores success), to
// test how the oracle behaves when stable storage fails.
func (m *MemPersister) FailSaves(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.saveErr = err
}

// Top returns the last successfully saved top, for test assertions.
func (m *MemPersister) Top() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.top
}

// Saves returns how many Saves succeeded, for test assertions.
func (m *MemPersister) Saves() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}
