// Package oracle is the timestamp oracle: it hands out strictly increasing
// uint64 timestamps that never repeat or go backwards, even across restarts
// and kill -9.
//
// Timestamps are hybrid: the high bits carry the oracle's physical clock in
// milliseconds, the low LogicalBits a counter. Lock expiry is judged against
// the physical part of a fresh timestamp, so every process measures time on
// the oracle's single clock rather than its own.
//
// A Server reserves ranges of timestamps and persists the top of each range
// (through a Persister) before serving any timestamp from it. A Client
// coalesces concurrent requests into one in-flight Reserve call against any
// Reserver — the Server in-process, or a remote oracle.
package oracle

import (
	"context"
	"time"
)

// LogicalBits is the number of low bits of a timestamp used by the logical
// counter; the remaining high bits hold milliseconds since the Unix epoch.
const LogicalBits = 18

// MaxTimestamp is the largest timestamp the oracle will ever serve. The top
// four bits are left free so that layers above may tag timestamps.
const MaxTimestamp = uint64(1)<<60 - 1

// Reserver hands out n consecutive timestamps [first, first+n).
type Reserver interface {
	Reserve(ctx context.Context, n int) (first uint64, err error)
}

// Persister stores the oracle's high-water mark on stable storage.
type Persister interface {
	// Load returns the last saved top, or 0 if nothing was ever saved.
	Load() (uint64, error)
	// Save durably records top; it must not return before top is on stable
	// storage.
	Save(top uint64) error
}

// Physical returns the physical (wall clock) part of ts.
func Physical(ts uint64) time.Time { return time.UnixMilli(int64(ts >> LogicalBits)) }

// PhysicalMillis returns the physical part of ts in milliseconds since the
// Unix epoch.
func PhysicalMillis(ts uint64) int64 { return int64(ts >> LogicalBits) }

// Compose builds the smallest timestamp whose physical part is ms.
func Compose(ms int64, logical uint64) uint64 { return uint64(ms)<<LogicalBits | logical }
