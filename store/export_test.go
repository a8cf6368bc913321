package store

// SetVisitHook makes every iterator of db report each raw key it visits.
// Call before using db concurrently.
func SetVisitHook(db *DB, visit func(key []byte)) { db.hooks.visit = visit }

// SetAfterChecksHook makes Apply call h with the row latch held, after the
// checks and before the commit. Call before using db concurrently.
func SetAfterChecksHook(db *DB, h func(txn *RowTxn)) { db.hooks.afterChecks = h }

// LatchIndex exposes the latch stripe of (table, row).
func LatchIndex(db *DB, table string, row []byte) int { return db.latches.index(table, row) }

// GroupByte is the key prefix byte of a group name.
func GroupByte(db *DB, group string) (byte, bool) {
	g, ok := db.layout.groupID(group)
	return byte(g), ok
}

// SetSeekHook makes every seek of db's operations call seek with its target.
// Call before using db concurrently.
func SetSeekHook(db *DB, seek func(target []byte)) { db.hooks.seek = seek }
