package engine

import "context"

// Collector is what the runners need of an engine to collect its garbage
// and keep running transactions safe from collections: every engine is
// one, since every engine keeps versions that someone must drop.
type Collector interface {
	// OldestActive is the start timestamp of the oldest transaction
	// running in this engine, 0 if none is. A process reports it, so that
	// a collection anywhere in the deployment keeps what it may still
	// read.
	OldestActive() uint64
	// GC drops what no snapshot at or above upTo reads, resolving the
	// locks below it first, and makes upTo the safe point every engine on
	// the store learns (see AdoptSafePoint). The runners decide upTo from
	// the workers' reports; GC trusts it.
	GC(ctx context.Context, upTo uint64) (GCStats, error)
	// AdoptSafePoint moves this engine's safe point up to the one the
	// last collection made, so that a transaction a collection passed
	// anyway (its process had stopped reporting) fails with
	// ErrSnapshotTooOld instead of reading a thinned snapshot. It returns
	// the safe point now known.
	AdoptSafePoint(ctx context.Context) (uint64, error)
	// Counts returns what the engine's transactions did since it opened.
	Counts() Counts
}

// GCStats counts what a collection did. Engines fill what applies to
// them and leave the rest zero.
type GCStats struct {
	SafePoint     uint64
	Columns       int // columns examined
	Deleted       int // versions removed
	LocksResolved int // locks below the safe point rolled forward or back
	// DeletionsKept counts delete records kept because the deletion's
	// notification is still pending.
	DeletionsKept int
	// Compacted lists the tables compacted after the collection.
	Compacted []string
}

// Counts are an engine's running totals.
type Counts struct {
	Committed uint64 // read-write transactions committed
	Conflicts uint64 // commits that failed with ErrConflict (and were retried)
}
