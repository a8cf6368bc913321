package percolator

import (
	"context"
	"errors"
	"fmt"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// What the observer runtime (package notify) needs beyond what observers
// see: reading and writing the framework's own columns (acks), and finding
// out what became of the transaction that left a notification.

// WriteAt is the newest write record of a cell in a snapshot and the
// timestamp it committed at: nil and 0 if the cell was never written.
type WriteAt struct {
	Write    *protocol.Write
	CommitTs uint64
}

// ReadWrites returns the newest write of each of keys (at most
// store.MaxRowReads) in the transaction's snapshot, resolving locks in the
// way, with one store call for all of them. It accepts reserved columns
// and does not look at the transaction's own writes. As a transaction's
// first read it chooses its snapshot where the store can (see store.TimestampReader):
// an observer's claim thus gets its snapshot, its ack and the observed
// cell's last change in one round trip.
func (tx *Txn) ReadWrites(ctx context.Context, keys []protocol.Key) ([]WriteAt, error) {
	if err := tx.checkUsable(false); err != nil {
		return nil, err
	}
	if err := tx.checkSnapshot(); err != nil {
		return nil, err
	}
	ws, err := tx.readWrites(tx.withSpan(ctx), keys)
	if err != nil {
		return nil, err
	}
	if err := tx.verify(); err != nil {
		return nil, err
	}
	return ws, nil
}

// readWrites is ReadWrites without its checks, for Get too.
func (tx *Txn) readWrites(ctx context.Context, keys []protocol.Key) ([]WriteAt, error) {
	reads := make([]store.RowRead, len(keys))
	for i, k := range keys {
		reads[i] = store.RowRead{Table: k.Table, Row: k.Row, Columns: []Column{k.Column}, Spans: protocol.ReadSpans(tx.startTs)}
	}
	res, err := tx.readRows(ctx, reads)
	if err != nil {
		what := keys[0].String()
		if len(keys) > 1 {
			what += fmt.Sprintf(" and %d more cells", len(keys)-1)
		}
		return nil, fmt.Errorf("framework: read %s: %w", what, err)
	}
	out := make([]WriteAt, len(keys))
	for i, k := range keys {
		if out[i].Write, out[i].CommitTs, err = tx.db.settleRead(ctx, tx.startTs, k, res[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// WriteValue returns the value w, a write record of k, stands for, or
// ErrNotFound if w is nil or a deletion.
func (tx *Txn) WriteValue(ctx context.Context, k protocol.Key, w *protocol.Write) ([]byte, error) {
	v, err := tx.db.writeValue(tx.withSpan(ctx), k, w)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if verr := tx.verify(); verr != nil {
		return nil, verr
	}
	return v, err
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
