package tikvengine

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/tikv/client-go/v2/kv"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/txnkv/transaction"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/keys"
	"github.com/trickle-dev/trickle/internal/tikvcall"
	"github.com/trickle-dev/trickle/store"
)

// reader is what a transaction reads through: a client-go transaction
// (its snapshot merged with its buffered writes) or, read-only, a
// snapshot.
type reader interface {
	Get(ctx context.Context, k []byte, opts ...kv.GetOption) (kv.ValueEntry, error)
	BatchGet(ctx context.Context, keys [][]byte, opts ...kv.BatchGetOption) (map[string]kv.ValueEntry, error)
	Iter(k, upperBound []byte) (tikvclient.Iterator, error)
}

// Txn is a framework transaction: one TiKV transaction, or a snapshot
// when read-only. It is not safe for concurrent use.
type Txn struct {
	db       *DB
	r        reader
	txn      *transaction.KVTxn // nil when read-only
	startTs  uint64
	readOnly bool
	done     bool
	// trace is the traceparent the transaction's notifications carry.
	trace []byte
	// notified holds the notification keys buffered, each written once.
	notified map[string]struct{}
	// rows are the rows notified, for Options.Notified, in the order
	// first notified; rowAt indexes them by table and row.
	rows  []engine.NotifiedRow
	rowAt map[string]int
	// writes are the cells written, kept when there are guards to check.
	writes map[string]written
	// lapsed is why the check between the prewrites and the commit
	// point failed the commit (see DB.fence), nil if it did not.
	lapsed error
	// term is the lease term the transaction began in, barrierTerm the
	// term of the process's GC barrier (see verify).
	term, barrierTerm uint64
	// run records the reads of an observer's run (see prefetch.go); nil
	// in other transactions.
	run *runReads
}

// StartTs is the transaction's snapshot timestamp: its TiKV start
// timestamp.
func (tx *Txn) StartTs() uint64 { return tx.startTs }

func (tx *Txn) checkUsable(write bool) error {
	switch {
	case tx.done:
		return ErrTxnDone
	case write && tx.readOnly:
		return fmt.Errorf("tikvengine: %w", engine.ErrReadOnly)
	}
	return nil
}

// Get returns the cell's value in the transaction's snapshot plus its own
// writes, or an error matching engine.ErrNotFound.
func (tx *Txn) Get(ctx context.Context, table string, row []byte, col store.Column) ([]byte, error) {
	if err := tx.checkUsable(false); err != nil {
		return nil, err
	}
	if err := engine.ValidateKey("Get", table, row, col); err != nil {
		return nil, err
	}
	k := tx.db.codec.dataKey(table, row, col)
	tx.run.noteRead(tx.db.codec, table, row, col)
	e, err := tx.r.Get(ctx, k)
	if verr := tx.verify(); verr != nil {
		return nil, verr
	}
	if err != nil {
		return nil, failIn(ctx, fmt.Sprintf("Get %s/%q/%s", table, row, col), err)
	}
	v, err := tikvcall.Unframe(k, e.Value, ErrCorrupt)
	if err != nil {
		return nil, err
	}
	return bytes.Clone(v), nil
}

// GetRows reads cols of each of rows in one batched get (which client-go
// splits by region and sends concurrently), merged with the transaction's
// own writes. Rows with none of cols are absent from the result.
func (tx *Txn) GetRows(ctx context.Context, table string, rows [][]byte, cols []store.Column) (map[string]map[store.Column][]byte, error) {
	if err := tx.checkUsable(false); err != nil {
		return nil, err
	}
	for i, c := range cols {
		if err := engine.ValidateKey("GetRows", table, []byte{0}, c); err != nil {
			return nil, err
		}
		if slices.Contains(cols[:i], c) {
			return nil, fmt.Errorf("%w: GetRows: column %s named twice", engine.ErrInvalidKey, c)
		}
	}
	type cell struct {
		row []byte
		col store.Column
	}
	ks := make([][]byte, 0, len(rows)*len(cols))
	want := make(map[string]cell, cap(ks))
	for _, r := range rows {
		if len(r) == 0 {
			return nil, fmt.Errorf("%w: GetRows: empty row in table %q", engine.ErrInvalidKey, table)
		}
		for _, c := range cols {
			k := tx.db.codec.dataKey(table, r, c)
			tx.run.noteRead(tx.db.codec, table, r, c)
			if _, dup := want[string(k)]; !dup {
				want[string(k)] = cell{r, c}
				ks = append(ks, k)
			}
		}
	}
	out := map[string]map[store.Column][]byte{}
	if len(ks) == 0 {
		return out, nil
	}
	got, err := tx.r.BatchGet(ctx, ks)
	if verr := tx.verify(); verr != nil {
		return nil, verr
	}
	if err != nil {
		return nil, failIn(ctx, "GetRows "+table, err)
	}
	for k, e := range got {
		c, ok := want[k]
		if !ok {
			continue
		}
		v, err := tikvcall.Unframe([]byte(k), e.Value, ErrCorrupt)
		if err != nil {
			return nil, err
		}
		m := out[string(c.row)]
		if m == nil {
			m = map[store.Column][]byte{}
			out[string(c.row)] = m
		}
		m[c.col] = bytes.Clone(v)
	}
	return out, nil
}

// ctxCheckEvery is how many keys a scan reads between checks of its
// context.
const ctxCheckEvery = 256

// Scan yields the cells o selects in row then column order, from the
// transaction's snapshot merged with its own writes (client-go's
// transaction iterator merges its buffer: a buffered delete hides the
// stored value), in requests of Options.ScanBatchSize keys. Columns a
// filter does not want are read and dropped.
func (tx *Txn) Scan(ctx context.Context, o engine.ScanOptions) iter.Seq2[engine.Entry, error] {
	return func(yield func(engine.Entry, error) bool) {
		if err := tx.validateScan(&o); err != nil {
			yield(engine.Entry{}, err)
			return
		}
		start, end := o.Start, o.End
		if o.Prefix != nil {
			start, end = o.Prefix, keys.PrefixSuccessor(o.Prefix)
		}
		if start != nil && end != nil && bytes.Compare(start, end) >= 0 {
			return
		}
		lower, upper := tx.db.codec.rowBounds(dataRange, o.Table, start, end)
		if keys.OneRow(start, end) && (len(o.Families) > 0 || len(o.Columns) > 0) {
			// One row's wanted columns: read only their range of keys, so
			// that the row's other cells (a large document, say) never
			// cross the wire.
			lower, upper = keys.SuffixBounds(lower, columnSuffixes(&o))
		}
		if a := o.After; a != nil {
			if after := keys.PrefixSuccessor(tx.db.codec.dataKey(o.Table, a.Row, a.Column)); bytes.Compare(after, lower) > 0 {
				lower = after
			}
			if upper != nil && bytes.Compare(lower, upper) >= 0 {
				return
			}
		}
		if err := tx.scan(ctx, &o, lower, upper, yield); err != nil {
			yield(engine.Entry{}, err)
		}
	}
}

// scan runs a validated scan over [lower, upper); it returns the error
// to yield. A read-only transaction streams what its snapshot's iterator
// reads. A read-write one reads its writes as they were when the scan
// began, as the protocol engine does: the writes buffered in the range
// are copied first and merged with a stream of the snapshot, so that
// writes the caller makes between two entries (an observer that rewrites
// what it scans) show in a later scan, never in this one, whatever the
// page size or the row's width.
func (tx *Txn) scan(ctx context.Context, o *engine.ScanOptions, lower, upper []byte, yield func(engine.Entry, error) bool) error {
	var it tikvclient.Iterator
	var err error
	if tx.txn == nil {
		it, err = tx.r.Iter(lower, upper)
	} else {
		it, err = tx.ownWrites(lower, upper)
	}
	if err != nil {
		return failIn(ctx, "Scan "+o.Table, err)
	}
	defer it.Close()
	return tx.scanIter(ctx, o, it, func(e engine.Entry) bool { return yield(e, nil) })
}

// ownWrites returns an iterator over [lower, upper) of the transaction's
// snapshot merged with a copy of its write buffer as it is now.
func (tx *Txn) ownWrites(lower, upper []byte) (tikvclient.Iterator, error) {
	var buf []bufferedEntry
	bit, err := tx.txn.GetMemBuffer().Iter(lower, upper)
	if err != nil {
		return nil, err
	}
	for bit.Valid() {
		buf = append(buf, bufferedEntry{key: bytes.Clone(bit.Key()), value: bytes.Clone(bit.Value())})
		if err := bit.Next(); err != nil {
			bit.Close()
			return nil, err
		}
	}
	bit.Close()
	sit, err := tx.txn.GetSnapshot().Iter(lower, upper)
	if err != nil {
		return nil, err
	}
	m := &mergedIter{snap: sit, buf: buf}
	if err := m.settle(); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// scanIter emits the wanted entries it reads, until it is done or emit
// says stop; it returns the first error.
func (tx *Txn) scanIter(ctx context.Context, o *engine.ScanOptions, it tikvclient.Iterator, emit func(engine.Entry) bool) error {
	var scratch []byte
	for steps := 0; it.Valid(); steps++ {
		if steps%ctxCheckEvery == ctxCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if tx.done {
			return ErrTxnDone
		}
		row, col, err := tx.db.codec.cellOf(it.Key(), &scratch, false)
		if err != nil {
			return err
		}
		if wanted(o, col) {
			v, err := tikvcall.Unframe(it.Key(), it.Value(), ErrCorrupt)
			if err != nil {
				return err
			}
			if err := tx.verify(); err != nil {
				return err
			}
			if !emit(engine.Entry{Row: bytes.Clone(row), Column: col, Value: bytes.Clone(v)}) {
				return nil
			}
		}
		if err := it.Next(); err != nil {
			return failIn(ctx, "Scan "+o.Table, err)
		}
	}
	return tx.verify()
}

// columnSuffixes are the escaped suffixes (family, or family and
// qualifier) of the columns o wants, sorted.
func columnSuffixes(o *engine.ScanOptions) [][]byte {
	var out [][]byte
	for _, f := range o.Families {
		out = append(out, keys.AppendFamilySuffix(nil, f))
	}
	for _, c := range o.Columns {
		out = append(out, keys.AppendColumnSuffix(nil, c.Family, c.Qualifier))
	}
	slices.SortFunc(out, bytes.Compare)
	return out
}

// wanted reports whether a scan's column filter selects col.
func wanted(o *engine.ScanOptions, col store.Column) bool {
	if len(o.Families) == 0 && len(o.Columns) == 0 {
		return true
	}
	return slices.Contains(o.Families, col.Family) || slices.Contains(o.Columns, col)
}

func (tx *Txn) validateScan(o *engine.ScanOptions) error {
	if err := tx.checkUsable(false); err != nil {
		return err
	}
	return engine.ValidateScan(o)
}

// Set buffers a write of value to the cell, and the notification it
// leaves if the column is strongly observed.
func (tx *Txn) Set(table string, row []byte, col store.Column, value []byte) error {
	if err := tx.checkWrite("Set", table, row, col); err != nil {
		return err
	}
	k := tx.db.codec.dataKey(table, row, col)
	if size := len(k) + len(value); size > maxEntry {
		return fmt.Errorf("%w: Set %s/%q/%s is %d bytes (key and value), over TiKV's entry limit of %d", ErrTooLarge, table, row, col, size, maxEntry)
	}
	if err := tx.txn.Set(k, tikvcall.Frame(value)); err != nil {
		return fail(fmt.Sprintf("Set %s/%q/%s (%d bytes)", table, row, col, len(value)), err)
	}
	tx.noteWrite(table, row, col)
	return tx.notifyIfObserved(table, row, col)
}

// Delete buffers a deletion of the cell, and the notification it leaves
// if the column is strongly observed.
func (tx *Txn) Delete(table string, row []byte, col store.Column) error {
	if err := tx.checkWrite("Delete", table, row, col); err != nil {
		return err
	}
	if err := tx.txn.Delete(tx.db.codec.dataKey(table, row, col)); err != nil {
		return fail("Delete", err)
	}
	tx.noteWrite(table, row, col)
	return tx.notifyIfObserved(table, row, col)
}

// NotifyWeak asks the weak observer of (table, col) to look at row once
// the transaction commits: the notification is a key of the transaction,
// committed with it.
func (tx *Txn) NotifyWeak(table string, row []byte, col store.Column) error {
	if err := tx.checkWrite("NotifyWeak", table, row, col); err != nil {
		return err
	}
	if err := tx.db.checkWeak(table, col); err != nil {
		return err
	}
	return tx.notify(table, row, col)
}

func (tx *Txn) checkWrite(op, table string, row []byte, col store.Column) error {
	if err := tx.checkUsable(true); err != nil {
		return err
	}
	return engine.ValidateKey(op, table, row, col)
}

func (tx *Txn) notifyIfObserved(table string, row []byte, col store.Column) error {
	if !tx.db.strongly(table, col) {
		return nil
	}
	return tx.notify(table, row, col)
}

// notify buffers the transaction's notification of a cell: one key per
// cell and writer (its start timestamp), however often it writes it.
func (tx *Txn) notify(table string, row []byte, col store.Column) error {
	k := tx.db.codec.notifyKey(table, row, col, tx.startTs)
	if _, dup := tx.notified[string(k)]; dup {
		return nil
	}
	if err := tx.txn.Set(k, tikvcall.Frame(tx.trace)); err != nil {
		return fail("notify", err)
	}
	if tx.notified == nil {
		tx.notified = map[string]struct{}{}
	}
	tx.notified[string(k)] = struct{}{}
	tx.noteRow(table, row, col)
	return nil
}

// noteRow records that the transaction notified (table, row, col), once
// per row and column, for Options.Notified.
func (tx *Txn) noteRow(table string, row []byte, col store.Column) {
	if tx.db.opts.Notified == nil {
		return
	}
	id := table + "\x00" + string(row)
	i, ok := tx.rowAt[id]
	if !ok {
		if tx.rowAt == nil {
			tx.rowAt = map[string]int{}
		}
		i = len(tx.rows)
		tx.rowAt[id] = i
		tx.rows = append(tx.rows, engine.NotifiedRow{Table: table, Row: bytes.Clone(row)})
	}
	if !slices.Contains(tx.rows[i].Columns, col) {
		tx.rows[i].Columns = append(tx.rows[i].Columns, col)
	}
}

// notifiedRows is what Options.Notified is given for the transaction's
// commit: its rows, or nil past engine.MaxNotifiedRows.
func (tx *Txn) notifiedRows() []engine.NotifiedRow {
	if len(tx.rows) > engine.MaxNotifiedRows {
		return nil
	}
	return tx.rows
}
