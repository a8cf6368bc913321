package tikvengine

// ImportBatches returns how many batches the DB's imports committed.
func (db *DB) ImportBatches() uint64 { return db.counts.importBatches.Load() }
