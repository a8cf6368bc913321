package percolator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// Column is a family:qualifier pair; see store.Column.
type Column = store.Column

// Txn is a snapshot-isolation transaction. Reads see the snapshot at its
// start timestamp plus its own buffered writes; writes are buffered until
// Commit. A Txn is not safe for concurrent use.
//
// Snapshot isolation prevents lost updates (two transactions writing the
// same cell cannot both commit) but allows write skew: two transactions that
// each read what the other writes, and write disjoint cells, may both commit.
type Txn struct {
	db      *DB
	startTs uint64
	// entered is the timestamp the transaction is registered at in the
	// active set: startTs, or for a lazy one the floor it began at.
	entered uint64
	// lazy is set while the transaction's snapshot is not chosen yet
	// (startTs is 0): its first read chooses it; see beginLazy.
	lazy bool
	// term is the term of the lease (Options.Lease) the transaction
	// began in; its reads count only while that term holds (verify).
	term uint64
	// unpinned is why StartTs could not choose a lazy transaction's
	// snapshot: it returned 0, which the caller may have written into
	// a key, so the transaction fails from then on.
	unpinned error
	begun    time.Time
	writes   map[string]*mutation
	weak     []protocol.Key      // weak notifications to write at commit, in request order
	weakSet  map[string]struct{} // bufKey of each entry of weak
	strong   atomic.Bool         // a prewrite carried a strong notification
	// prewrote is set once a two-phase commit began to prewrite: a
	// failed commit may have left locks then (a one-phase commit never
	// does).
	prewrote bool

	managed  bool
	readOnly bool
	done     bool

	// span is the transaction's span (noSpan when it has none); outcome is
	// set when the commit decides it, and both end in discard.
	span     trace.Span
	outcome  string
	commitTs uint64
	// traceCtx is the trace context notifications written by this commit
	// carry: set before the prewrites, read-only during them.
	traceCtx []byte
}

// noSpan is the span of a transaction started without one (BeginAt).
var noSpan = trace.SpanFromContext(context.Background())

// withSpan returns ctx carrying the transaction's span, so that the spans
// of work done for it (lock resolution) are its children, and log lines
// written with ctx carry its trace ids. Untraced transactions pay nothing.
func (tx *Txn) withSpan(ctx context.Context) context.Context {
	if !tx.span.IsRecording() || trace.SpanFromContext(ctx) == tx.span {
		return ctx
	}
	return trace.ContextWithSpan(ctx, tx.span)
}

type mutation struct {
	key   protocol.Key
	op    protocol.Op
	value []byte
	// guarded is set at commit for a guarded cell whose guard the
	// transaction writes (see GuardSet): a one-phase commit does not
	// check it.
	guarded bool
}

// StartTs returns the transaction's snapshot timestamp. A transaction
// whose first read was to choose it (see DB.View) and has not read yet
// draws it from the oracle now. If the oracle cannot be reached it
// returns 0, and every later operation of the transaction fails with the
// oracle's error: the caller may have used the 0 (in a key, say), so the
// transaction must not commit.
func (tx *Txn) StartTs() uint64 {
	if tx.lazy && !tx.done && tx.unpinned == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := tx.pin(ctx); err != nil {
			tx.unpinned = fmt.Errorf("framework: the transaction's start timestamp was asked for and could not be drawn: %w", err)
		}
	}
	return tx.startTs
}

// bufKey is the map key of a buffered write. Each part but the last is
// length-prefixed so that distinct keys never collide.
func bufKey(table string, row []byte, col Column) string {
	b := make([]byte, 0, 12+len(table)+len(row)+len(col.Family)+len(col.Qualifier))
	b = binary.AppendUvarint(b, uint64(len(table)))
	b = append(b, table...)
	b = binary.AppendUvarint(b, uint64(len(row)))
	b = append(b, row...)
	b = binary.AppendUvarint(b, uint64(len(col.Family)))
	b = append(b, col.Family...)
	return string(append(b, col.Qualifier...))
}

func (tx *Txn) checkUsable(write bool) error {
	switch {
	case tx.done:
		return ErrTxnDone
	case write && tx.readOnly:
		return ErrReadOnly
	case tx.unpinned != nil:
		return tx.unpinned
	}
	return nil
}

// Set buffers a write of value to the cell.
func (tx *Txn) Set(table string, row []byte, col Column, value []byte) error {
	return tx.buffer("Set", table, row, col, protocol.OpPut, value)
}

// Delete buffers a deletion of the cell.
func (tx *Txn) Delete(table string, row []byte, col Column) error {
	return tx.buffer("Delete", table, row, col, protocol.OpDelete, nil)
}

func (tx *Txn) buffer(op, table string, row []byte, col Column, o protocol.Op, value []byte) error {
	if err := tx.checkUsable(true); err != nil {
		return err
	}
	if err := engine.ValidateKey(op, table, row, col); err != nil {
		return err
	}
	tx.setRaw(protocol.Key{Table: table, Row: row, Column: col}, o, value)
	return nil
}

// setRaw buffers a write without validating the key, for the framework's
// own columns (acks).
func (tx *Txn) setRaw(k protocol.Key, o protocol.Op, value []byte) {
	if tx.writes == nil {
		tx.writes = make(map[string]*mutation)
	}
	k.Row = append([]byte(nil), k.Row...)
	tx.writes[bufKey(k.Table, k.Row, k.Column)] = &mutation{key: k, op: o, value: append([]byte(nil), value...)}
}

// Get returns the value of the cell in the transaction's snapshot, or
// ErrNotFound. A lock left by a transaction that started at or before this
// snapshot is resolved first: rolled forward if its primary committed, rolled
// back if its owner is gone, waited for otherwise.
func (tx *Txn) Get(ctx context.Context, table string, row []byte, col Column) ([]byte, error) {
	if err := tx.checkUsable(false); err != nil {
		return nil, err
	}
	if err := engine.ValidateKey("Get", table, row, col); err != nil {
		return nil, err
	}
	if len(tx.writes) > 0 {
		if m, ok := tx.writes[bufKey(table, row, col)]; ok {
			if m.op == protocol.OpDelete {
				return nil, ErrNotFound
			}
			return append([]byte(nil), m.value...), nil
		}
	}
	if err := tx.checkSnapshot(); err != nil {
		return nil, err
	}
	ctx = tx.withSpan(ctx)
	k := protocol.Key{Table: table, Row: row, Column: col}
	var v []byte
	var err error
	if !tx.lazy {
		v, err = tx.db.readCell(ctx, tx.startTs, k)
	} else {
		var ws []WriteAt
		if ws, err = tx.readWrites(ctx, []protocol.Key{k}); err != nil {
			return nil, err
		}
		v, err = tx.db.writeValue(ctx, k, ws[0].Write)
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if verr := tx.verify(); verr != nil {
		return nil, verr
	}
	return v, err
}

// checkSnapshot fails a read below the safe point. A lazy transaction has
// no snapshot yet, and the one it gets cannot be below its floor.
func (tx *Txn) checkSnapshot() error {
	if tx.lazy {
		return nil
	}
	if sp := tx.db.active.safePoint.Load(); tx.startTs < sp {
		return fmt.Errorf("%w: start %d is below safe point %d", ErrSnapshotTooOld, tx.startTs, sp)
	}
	return nil
}

// Commit runs the two-phase commit. On success the writes are durable and
// visible to every transaction that starts afterwards. On ErrConflict nothing
// was written (the transaction may be retried from the start, re-reading
// everything).
func (tx *Txn) Commit(ctx context.Context) error {
	if tx.managed {
		return ErrManaged
	}
	return tx.commit(ctx)
}

// Rollback abandons the transaction. Nothing it buffered is written.
// Calling it after Commit is a no-op.
func (tx *Txn) Rollback() error {
	if tx.managed {
		return ErrManaged
	}
	tx.discard()
	return nil
}

func (tx *Txn) discard() {
	if tx.done {
		return
	}
	tx.done = true
	if tx.outcome == "" {
		tx.outcome = txnReadOnly
		if !tx.readOnly && (len(tx.writes) > 0 || len(tx.weak) > 0) {
			tx.outcome = txnRolledBack
			tx.db.stats.Aborted.Add(1)
		}
	}
	tx.endSpan()
	tx.writes, tx.weak, tx.weakSet = nil, nil, nil
	tx.db.finish(tx.entered)
}

// fail discards a transaction whose function returned err.
func (tx *Txn) fail(err error) {
	if tx.span.IsRecording() {
		tx.span.RecordError(err)
	}
	tx.discard()
}

func (tx *Txn) endSpan() {
	span := tx.span
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(attrTxnResult.String(tx.outcome), attrWrites.Int(len(tx.writes)))
	if tx.readOnly {
		span.SetAttributes(attrReadOnly.Bool(true))
	}
	if tx.commitTs != 0 {
		span.SetAttributes(attrCommitTs.Int64(int64(tx.commitTs)))
	}
	switch tx.outcome {
	case txnCommitted, txnReadOnly:
	default:
		span.SetStatus(codes.Error, tx.outcome)
	}
	span.End()
}

// endSpanError ends the span of a transaction that could not begin.
func endSpanError(span trace.Span, err error) {
	if span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// readCell reads k at startTs, resolving locks in the way.
func (db *DB) readCell(ctx context.Context, startTs uint64, k protocol.Key) ([]byte, error) {
	w, _, err := db.readWrite(ctx, startTs, k)
	if err != nil {
		return nil, err
	}
	return db.writeValue(ctx, k, w)
}

// readWrite returns the newest write record of k at startTs and its commit
// timestamp (nil, 0 if none), resolving locks in the way.
func (db *DB) readWrite(ctx context.Context, startTs uint64, k protocol.Key) (*protocol.Write, uint64, error) {
	cells, err := db.st.ReadRow(ctx, k.Table, k.Row, []Column{k.Column}, protocol.ReadSpans(startTs))
	if err != nil {
		return nil, 0, fmt.Errorf("framework: read %s: %w", k, err)
	}
	return db.settleRead(ctx, startTs, k, cells)
}

// settleRead returns what readWrite returns from cells, read from k with
// protocol.ReadSpans(startTs): a lock in them is resolved and k read again.
func (db *DB) settleRead(ctx context.Context, startTs uint64, k protocol.Key, cells []store.Cell) (*protocol.Write, uint64, error) {
	var waits int
	for {
		r, err := protocol.InterpretRead(cells, startTs)
		if err != nil {
			return nil, 0, fmt.Errorf("framework: read %s: %w", k, err)
		}
		if r.Lock == nil {
			return r.Write, r.CommitTs, nil
		}
		if err := db.resolve(ctx, k, r.LockStartTs, r.Lock, false, &waits); err != nil {
			return nil, 0, fmt.Errorf("framework: read %s: %w", k, err)
		}
		if cells, err = db.st.ReadRow(ctx, k.Table, k.Row, []Column{k.Column}, protocol.ReadSpans(startTs)); err != nil {
			return nil, 0, fmt.Errorf("framework: read %s: %w", k, err)
		}
	}
}

// writeValue returns the value a write record stands for.
func (db *DB) writeValue(ctx context.Context, k protocol.Key, w *protocol.Write) ([]byte, error) {
	if w == nil || w.Op == protocol.OpDelete {
		return nil, ErrNotFound
	}
	if w.Inline {
		return w.Value, nil
	}
	cells, err := db.st.ReadRow(ctx, k.Table, k.Row, []Column{k.Column}, protocol.DataSpan(w.StartTs))
	if err != nil {
		return nil, fmt.Errorf("framework: read data of %s: %w", k, err)
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("framework: read %s: %w: no data record for write of %d", k, protocol.ErrCorrupt, w.StartTs)
	}
	return cells[0].Value, nil
}

// WriteAt is the newest write record of a cell in a snapshot and the
// timestamp it committed at: nil and 0 if the cell was never written.
type WriteAt struct {
	Write    *protocol.Write
	CommitTs uint64
}

// readWrites is readWritesChecked without its checks, for Get too.
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
