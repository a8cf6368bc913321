package remote

import (
	"sync"

	"github.com/trickle-dev/trickle/store"
)

// encoders recycles encode buffers: NATS copies a payload into its write
// buffer before Publish returns, so a buffer is free again right after.
var encoders = sync.Pool{New: func() any { return &encoder{b: make([]byte, 0, 512)} }}

// maxPooledBuf keeps one huge message from pinning its buffer in the pool.
const maxPooledBuf = 1 << 20

func getEncoder() *encoder { e := encoders.Get().(*encoder); e.b = e.b[:0]; return e }

func putEncoder(e *encoder) {
	if cap(e.b) <= maxPooledBuf {
		encoders.Put(e)
	}
}

func (e *encoder) column(c store.Column) {
	e.str(c.Family)
	e.str(c.Qualifier)
}

func (d *decoder) column() store.Column {
	return store.Column{Family: d.str(), Qualifier: d.str()}
}

func (e *encoder) spans(spans []store.Span) {
	e.uvarint(uint64(len(spans)))
	for _, s := range spans {
		e.u64(s.MaxTs)
		e.u64(s.MinTs)
		e.varint(int64(s.Limit)) // signed: a negative limit must reach the store's validation
	}
}

func (d *decoder) spans() []store.Span {
	n := d.count(17)
	if n == 0 {
		return nil
	}
	spans := make([]store.Span, n)
	for i := range spans {
		spans[i] = store.Span{MaxTs: d.u64(), MinTs: d.u64(), Limit: d.int()}
	}
	return spans
}

// encodeApply encodes an Apply request. The txn must not be nil.
func (e *encoder) applyReq(txn *store.RowTxn) {
	e.str(txn.Table)
	e.bytes(txn.Row)
	var flags byte
	if txn.NoSync {
		flags |= txnNoSync
	}
	if txn.Snapshot != 0 {
		flags |= txnSnapshot
	}
	e.u8(flags)
	if txn.Snapshot != 0 {
		e.u64(txn.Snapshot)
	}
	e.uvarint(uint64(len(txn.Checks)))
	for i := range txn.Checks {
		c := &txn.Checks[i]
		e.column(c.Column)
		e.u64(c.MinTs)
		e.u64(c.MaxTs)
		e.optBytes(c.ValuePrefix)
		e.u8(byte(c.Expect))
	}
	e.uvarint(uint64(len(txn.Mutations)))
	for i := range txn.Mutations {
		m := &txn.Mutations[i]
		e.column(m.Column)
		e.u64(m.Ts)
		e.u8(mutationKind(m))
		if !m.Delete { // a delete's value is never written
			e.bytes(m.Value)
		}
		e.optBytes(m.IfValuePrefix)
	}
}

// A row transaction's flags on the wire: the byte a bool NoSync used to
// be, so that requests without a Snapshot read the same.
const (
	txnNoSync   = 1 << 0
	txnSnapshot = 1 << 1 // a Snapshot follows
)

// A mutation's kind on the wire: the first two values are what a bool
// Delete used to encode, so requests without single deletes read the same.
const (
	kindSet          = 0
	kindDelete       = 1
	kindSingleDelete = 2
)

func mutationKind(m *store.Mutation) byte {
	switch {
	case m.Delete && m.SingleDelete:
		return kindSingleDelete
	case m.Delete:
		return kindDelete
	}
	return kindSet
}

func (d *decoder) applyReq() *store.RowTxn {
	txn := &store.RowTxn{Table: d.str(), Row: d.bytes()}
	switch flags := d.u8(); {
	case flags&^(txnNoSync|txnSnapshot) != 0:
		d.fail("bad row transaction flags %#x", flags)
	default:
		txn.NoSync = flags&txnNoSync != 0
		if flags&txnSnapshot != 0 {
			txn.Snapshot = d.u64()
		}
	}
	if n := d.count(20); n > 0 {
		txn.Checks = make([]store.Check, n)
		for i := range txn.Checks {
			txn.Checks[i] = store.Check{Column: d.column(), MinTs: d.u64(), MaxTs: d.u64(),
				ValuePrefix: d.optBytes(), Expect: store.Presence(d.u8())}
		}
	}
	if n := d.count(12); n > 0 {
		txn.Mutations = make([]store.Mutation, n)
		for i := range txn.Mutations {
			m := &txn.Mutations[i]
			m.Column, m.Ts = d.column(), d.u64()
			switch d.u8() {
			case kindSet:
			case kindDelete:
				m.Delete = true
			case kindSingleDelete:
				m.Delete, m.SingleDelete = true, true
			default:
				d.fail("bad mutation kind")
			}
			if !m.Delete {
				m.Value = d.bytes()
			}
			m.IfValuePrefix = d.optBytes()
		}
	}
	return txn
}

// applyAllReq encodes an ApplyAll request: the number of row
// transactions, then each as an Apply request. No txn may be nil.
func (e *encoder) applyAllReq(txns []*store.RowTxn) {
	e.uvarint(uint64(len(txns)))
	for _, txn := range txns {
		e.applyReq(txn)
	}
}

func (d *decoder) applyAllReq() []*store.RowTxn {
	n := d.count(5) // empty table, row, no-sync, checks and mutations: 5 bytes
	if n == 0 {
		return nil
	}
	txns := make([]*store.RowTxn, n)
	for i := range txns {
		txns[i] = d.applyReq()
	}
	return txns
}

// applyAllResp encodes the answer to an ApplyAll: the wire version, the
// number of results, then each as an Apply answer without its version.
func (e *encoder) applyAllResp(results []store.RowResult) {
	e.u8(wireVersion)
	e.uvarint(uint64(len(results)))
	for _, r := range results {
		e.rowResult(r)
	}
}

// applyAllResp decodes the answer to an ApplyAll of n row transactions:
// exactly one result per transaction.
func (d *decoder) applyAllResp(n int) []store.RowResult {
	d.version()
	got := d.count(3)
	if got != n && d.Err() == nil {
		d.fail("%d results for %d row transactions", got, n)
	}
	if d.Err() != nil {
		return nil
	}
	out := make([]store.RowResult, got)
	for i := range out {
		out[i] = d.rowResult()
	}
	if d.Err() != nil {
		return nil
	}
	return out
}

func (e *encoder) applyResp(r store.RowResult) {
	e.u8(wireVersion)
	e.rowResult(r)
}

func (e *encoder) rowResult(r store.RowResult) {
	e.bool(r.Applied)
	e.varint(int64(r.FailedCheck))
	e.bool(r.Conflict != nil)
	if c := r.Conflict; c != nil {
		e.bytes(c.Row)
		e.column(c.Column)
		e.u64(c.Ts)
		e.bytes(c.Value)
	}
}

func (d *decoder) applyResp() store.RowResult {
	d.version()
	return d.rowResult()
}

func (d *decoder) rowResult() store.RowResult {
	r := store.RowResult{Applied: d.bool(), FailedCheck: d.int()}
	if d.bool() {
		r.Conflict = &store.Cell{Row: d.bytes(), Column: d.column(), Ts: d.u64(), Value: d.bytes()}
	}
	return r
}

// readRowReq is a decoded ReadRow request.
type readRowReq struct {
	table string
	row   []byte
	cols  []store.Column
	spans []store.Span
}

func (e *encoder) readRowReq(table string, row []byte, cols []store.Column, spans []store.Span) {
	e.str(table)
	e.bytes(row)
	e.uvarint(uint64(len(cols)))
	for _, c := range cols {
		e.column(c)
	}
	e.spans(spans)
}

func (d *decoder) readRowReq() readRowReq {
	r := readRowReq{table: d.str(), row: d.bytes()}
	if n := d.count(2); n > 0 {
		r.cols = make([]store.Column, n)
		for i := range r.cols {
			r.cols[i] = d.column()
		}
	}
	r.spans = d.spans()
	return r
}

// readRowResp encodes the answer to a ReadRow: the wire version, then the
// cells (see rowCells).
func (e *encoder) readRowResp(cells []store.Cell, colIdx []int) {
	e.u8(wireVersion)
	e.rowCells(cells, colIdx)
}

// readRowResp decodes what encoder.readRowResp wrote; see rowCells.
func (d *decoder) readRowResp(row []byte, cols []store.Column) []store.Cell {
	d.version()
	return d.rowCells(row, cols)
}

// rowCells encodes the cells read from one row as (index into the
// request's cols, ts, value): row and column are known to the caller, so
// they are not sent back. colIdx maps each cell to its index; it is
// computed by the server.
func (e *encoder) rowCells(cells []store.Cell, colIdx []int) {
	e.uvarint(uint64(len(cells)))
	for i := range cells {
		e.uvarint(uint64(colIdx[i]))
		e.u64(cells[i].Ts)
		e.bytes(cells[i].Value)
	}
}

// rowCells decodes cells for the request's row and cols. The cells share
// one private copy of row (capacity-limited); values alias the message.
func (d *decoder) rowCells(row []byte, cols []store.Column) []store.Cell {
	n := d.count(10)
	if n == 0 || d.Err() != nil {
		return nil
	}
	cells := make([]store.Cell, n)
	own := append(make([]byte, 0, len(row)), row...)
	for i := range cells {
		idx := d.uvarint()
		if idx >= uint64(len(cols)) && d.Err() == nil {
			d.fail("column index %d out of range", idx)
		}
		if d.Err() != nil {
			return nil
		}
		cells[i] = store.Cell{Row: own, Column: cols[idx], Ts: d.u64(), Value: d.bytes()}
	}
	if d.Err() != nil {
		return nil
	}
	return cells
}

// readRowsReq encodes a ReadRows request: the number of reads, then each
// as a ReadRow request.
func (e *encoder) readRowsReq(reads []store.RowRead) {
	e.uvarint(uint64(len(reads)))
	for i := range reads {
		r := &reads[i]
		e.readRowReq(r.Table, r.Row, r.Columns, r.Spans)
	}
}

func (d *decoder) readRowsReq() []store.RowRead {
	n := d.count(4) // empty table, row, columns and spans: 4 bytes
	if n == 0 {
		return nil
	}
	reads := make([]store.RowRead, n)
	for i := range reads {
		r := d.readRowReq()
		reads[i] = store.RowRead{Table: r.table, Row: r.row, Columns: r.cols, Spans: r.spans}
	}
	return reads
}

// readRowsResp encodes the answer to a ReadRows: the wire version, the
// number of results, then the cells of each read in request order (see
// rowCells). colIdx[i] maps the cells of results[i] to the read's columns.
func (e *encoder) readRowsResp(results [][]store.Cell, colIdx [][]int) {
	e.u8(wireVersion)
	e.uvarint(uint64(len(results)))
	for i := range results {
		e.rowCells(results[i], colIdx[i])
	}
}

// readRowsResp decodes the answer to reads: exactly one result per read,
// each decoded for the read's row and columns.
func (d *decoder) readRowsResp(reads []store.RowRead) [][]store.Cell {
	d.version()
	n := d.count(1)
	if n != len(reads) && d.Err() == nil {
		d.fail("%d results for %d reads", n, len(reads))
	}
	if d.Err() != nil {
		return nil
	}
	out := make([][]store.Cell, n)
	for i := range out {
		out[i] = d.rowCells(reads[i].Row, reads[i].Columns)
	}
	if d.Err() != nil {
		return nil
	}
	return out
}

func (e *encoder) tablesResp(tables []string) {
	e.u8(wireVersion)
	e.uvarint(uint64(len(tables)))
	for _, t := range tables {
		e.str(t)
	}
}

func (d *decoder) tablesResp() []string {
	d.version()
	n := d.count(1)
	if n == 0 {
		return nil
	}
	tables := make([]string, n)
	for i := range tables {
		tables[i] = d.str()
	}
	return tables
}
