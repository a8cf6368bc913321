package store

import (
	"context"

	"github.com/cockroachdb/pebble/v2"
)

// SetVisitHook makes every iterator of db report each raw key it visits.
// Call before using db concurrently.
func SetVisitHook(db *DB, visit func(key []byte)) { db.hooks.visit = visit }

// SetAfterChecksHook makes Apply, and ApplyAll for each of its row
// transactions, call h with the row latch held, after the checks and
// before the commit. Call before using db concurrently.
func SetAfterChecksHook(db *DB, h func(txn *RowTxn)) { db.hooks.afterChecks = h }

// SetAfterReadHook makes ReadRows call h after it read reads[i]. Call
// before using db concurrently.
func SetAfterReadHook(db *DB, h func(i int)) { db.hooks.afterRead = h }

// SetCommitHook makes Apply and ApplyAll call h right before they commit a
// pebble batch, with whether the commit syncs. Call before using db
// concurrently.
func SetCommitHook(db *DB, h func(sync bool)) { db.hooks.commit = h }

// SetSortedIngestHook makes Ingest call h when a request is not in key
// order (see writeInOrder) and is sorted before it is written. Call
// before using db concurrently.
func SetSortedIngestHook(db *DB, h func()) { db.hooks.sortedIngest = h }

// SetLatchWaitHook makes every row transaction that finds a row latch held
// call h with the latch's stripe (see LatchIndex) right before it blocks.
// Call before using db concurrently.
func SetLatchWaitHook(db *DB, h func(stripe int)) { db.latches.onWait = h }

// SetPendingFoundHook makes every Scan that checks for pending atomic
// writes call h with how many it found, before it waits for them. Call
// before using db concurrently.
func SetPendingFoundHook(db *DB, h func(n int)) { db.pending.found = h }

// LatchHeld reports whether the latch of (table, row) is held by anyone,
// the caller included.
func LatchHeld(db *DB, table string, row []byte) bool {
	m := &db.latches.stripes[db.latches.index(table, row)].Mutex
	if m.TryLock() {
		m.Unlock()
		return false
	}
	return true
}

// LatchIndex exposes the latch stripe of (table, row).
func LatchIndex(db *DB, table string, row []byte) int { return db.latches.index(table, row) }

// GroupByte is the key prefix byte of a group name.
func GroupByte(db *DB, group string) (byte, bool) {
	g, ok := db.layout.GroupID(group)
	return byte(g), ok
}

// SetSeekHook makes every seek of db's operations call seek with its target.
// Call before using db concurrently.
func SetSeekHook(db *DB, seek func(target []byte)) { db.hooks.seek = seek }

// Flush flushes db's memtable to a new L0 sstable.
func Flush(db *DB) error { return db.pdb.Flush() }

// CompactAll compacts db's whole key space down the LSM.
func CompactAll(db *DB) error {
	return db.pdb.Compact(context.Background(), []byte{0x00}, []byte{0xFF, 0xFF}, false)
}

// TableCount returns how many sstables db has in total and in L0.
func TableCount(db *DB) (total, l0 int64) {
	m := db.pdb.Metrics()
	for _, l := range m.Levels {
		total += l.TablesCount
	}
	return total, m.Levels[0].TablesCount
}

// LevelTables returns how many sstables each level of db's LSM holds,
// from L0 to the last level.
func LevelTables(db *DB) []int64 {
	m := db.pdb.Metrics()
	out := make([]int64, len(m.Levels))
	for i, l := range m.Levels {
		out[i] = l.TablesCount
	}
	return out
}

// FilterExclusions is how many times a bloom filter spared db from reading
// an sstable's data.
func FilterExclusions(db *DB) int64 { return db.pdb.Metrics().Filter.Hits }

// ComparerName is the name of the pebble comparer the store uses.
const ComparerName = comparerName

// OpenWithoutCompactions opens a store whose pebble never compacts on its own
// (and never stalls writes for a deep L0), so that every Flush adds an L0
// sublevel until CompactAll.
func OpenWithoutCompactions(dir string, opts *Options) (*DB, error) {
	return open(dir, opts, func(o *pebble.Options) {
		o.DisableAutomaticCompactions = true
		o.L0CompactionThreshold = 1 << 20
		o.L0StopWritesThreshold = 1 << 20
	})
}

// ValuesInValueBlocks is how many values db's sstables keep in value
// blocks rather than next to their keys.
func ValuesInValueBlocks(db *DB) (uint64, error) {
	levels, err := db.pdb.SSTables(pebble.WithProperties())
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, tables := range levels {
		for _, t := range tables {
			n += t.Properties.NumValuesInValueBlocks
		}
	}
	return n, nil
}

// SetDurableWaitHook makes every read that finds a synced write in flight
// on a row it read call h with the row's latch stripe, right before it
// waits for the write to reach stable storage. Call before using db
// concurrently.
func SetDurableWaitHook(db *DB, h func(stripe int)) { db.latches.onDurableWait = h }
