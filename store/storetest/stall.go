package storetest

import (
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// LogStall is a fault for a pebble store's filesystem: once armed, the
// next sync of a write-ahead log file blocks until Release. A synced write
// is then readable in the store's memtable but not on stable storage: the
// window in which a power cut, or a kill -9 of the store's process, takes
// it back. Wrap a vfs.NewCrashableMem with it, and take the crash with the
// MemFS's CrashClone while a write is stalled.
type LogStall struct {
	mu       sync.Mutex
	armed    bool
	stalled  chan struct{} // closed when the armed sync blocks
	released chan struct{} // closed by Release; never replaced
}

// NewLogStall returns a fault that is not armed.
func NewLogStall() *LogStall {
	return &LogStall{stalled: make(chan struct{}), released: make(chan struct{})}
}

// Wrap returns fs with the fault injected.
func (s *LogStall) Wrap(fs vfs.FS) vfs.FS { return errorfs.Wrap(fs, s) }

// Arm makes the next log sync block until Release. A LogStall stalls
// one sync in its life: use a new one for another.
func (s *LogStall) Arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.stalled:
	default:
		s.armed = true
	}
}

// Stalled is closed once the sync that Arm armed blocks.
func (s *LogStall) Stalled() <-chan struct{} { return s.stalled }

// Release lets the blocked sync, if any, complete. It may be called more
// than once (a test's cleanup releases whatever a failure left stalled).
func (s *LogStall) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
	select {
	case <-s.released:
	default:
		close(s.released)
	}
}

// MaybeError implements errorfs.Injector: it blocks the armed sync of a
// log file. It never injects an error.
func (s *LogStall) MaybeError(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
	default:
		return nil
	}
	if !strings.HasSuffix(op.Path, ".log") {
		return nil
	}
	s.mu.Lock()
	armed := s.armed
	if armed {
		s.armed = false
		close(s.stalled)
	}
	s.mu.Unlock()
	if armed {
		<-s.released
	}
	return nil
}

// String implements errorfs.Injector.
func (s *LogStall) String() string { return "stalled log sync" }
