package tikvengine

// ForgetRecent drops what db keeps of its own commits' notifications, so
// that its next Pending reads TiKV: tests of the notification layout use
// it.
func ForgetRecent(db *DB) {
	db.recent.mu.Lock()
	defer db.recent.mu.Unlock()
	db.recent.cells = nil
}

// ImportBatches returns how many batches the DB's imports committed.
func (db *DB) ImportBatches() uint64 { return db.counts.importBatches.Load() }

// LapseBarrier makes b lapse, as a pause past its TTL would.
func LapseBarrier(b *Barrier) { b.heldUntil.Store(1) }
