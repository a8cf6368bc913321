package percolator

import (
	"context"

	"github.com/trickle-dev/trickle/internal/protocol"
)

// What the observer runtime (package notify) needs beyond what observers
// see: reading and writing the framework's own columns (acks), and finding
// out what became of the transaction that left a notification.

// ReadAt returns the value of k in the snapshot at startTs, resolving locks
// in the way, or ErrNotFound. Unlike Txn.Get it accepts reserved columns.
func (db *DB) ReadAt(ctx context.Context, startTs uint64, k protocol.Key) ([]byte, error) {
	return db.readCell(ctx, startTs, k)
}

// CommittedAt returns the commit timestamp of the newest write of k
// visible at startTs (0 if none), resolving locks in the way.
func (db *DB) CommittedAt(ctx context.Context, startTs uint64, k protocol.Key) (uint64, error) {
	_, ts, err := db.readWrite(ctx, startTs, k)
	return ts, err
}

// TxnStatus reads what became of the transaction that started at startTs
// with primary as its primary cell.
func (db *DB) TxnStatus(ctx context.Context, primary protocol.Key, startTs uint64) (protocol.Status, error) {
	return db.txnStatus(ctx, primary, startTs)
}

// SetRaw buffers a write of value to k without the checks Set makes, for
// the framework's own columns (acks).
func (tx *Txn) SetRaw(k protocol.Key, value []byte) {
	tx.setRaw(k, protocol.OpPut, value)
}
