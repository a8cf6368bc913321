package percolator

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// ErrImportNotEmpty is returned by Import when a table it is to write
// already holds cells other than its own: the engine seam's, so that
// callers test for one error whichever engine imports.
var ErrImportNotEmpty = engine.ErrImportNotEmpty

// ImportOptions configure Import: the engine seam's (see the framework's
// ImportOptions).
type ImportOptions = engine.ImportOptions

// The engine over a store imports through the seam.
var _ engine.Importer = (*Importer)(nil)

// Importer buffers the cells of an import and writes them, a chunk at a
// time, as committed versions. It is used by one goroutine.
type Importer struct {
	db                *DB
	ctx               context.Context
	opts              ImportOptions
	startTs, commitTs uint64
	tables            map[string]bool

	cells    [][]importCell // blocks of cellBlock cells: no copying as they grow
	ncells   int
	buffered int
	block    []byte   // the free end of the current arena block
	arenas   [][]byte // the arena blocks of the buffered cells
	prepared bool
	// mem is the memory the import's chunks reuse, shared by the
	// Importer and the chunks it writes.
	mem *importMemory
	// ingested is set on a chunk written by the store's Ingest, which
	// keeps nothing of it: its memory may then be reused.
	ingested bool
	// noIngest is set, for the import and all its chunks, once the store
	// refused to ingest (errors.ErrUnsupported).
	noIngest *atomic.Bool
	// writing, when not nil, delivers the result of the chunk being
	// written in the background (inflight) while Set buffers the next one.
	writing  chan error
	inflight *Importer
	// wmem is the memory this chunk is written with.
	wmem *writeMemory
}

// importMemory is the memory an import's chunks are built and written
// in, kept from one chunk to the next: a chunk is a million cells, and
// taking fresh memory for each cost page faults, zeroing and collections
// (with assists that stalled the chunk being written), more than the
// copying itself. The buffers of a chunk return to it once the chunk is
// ingested; a chunk written with ApplyAll leaves its memory to the
// store, which may keep slices of it.
type importMemory struct {
	cells  [][]importCell // spare blocks of cells
	arenas [][]byte       // spare arena blocks
	writes []*writeMemory // spare memory to write chunks with
}

// writeMemory is the memory a chunk is written with: rowTxns' buffers,
// one per block of cells, and the row transactions of all blocks.
type writeMemory struct {
	rows []rowMemory
	txns []*store.RowTxn
}

// rowMemory is the memory rowTxns turns a block of cells into row
// transactions in.
type rowMemory struct {
	muts []store.Mutation
	rows []store.RowTxn
	bufs [][]byte // blocks the write records are encoded into
}

// buf returns the i-th block to encode write records into, empty, with
// room for need bytes.
func (m *rowMemory) buf(i, need int) []byte {
	if i == len(m.bufs) {
		m.bufs = append(m.bufs, nil)
	}
	if cap(m.bufs[i]) < need {
		m.bufs[i] = make([]byte, 0, max(arenaBlock, need))
	}
	return m.bufs[i][:0]
}

// spare takes the last of the spare buffers in *from, or makes a new one
// if there is none.
func spare[T any](from *[]T, fresh func() T) T {
	n := len(*from)
	if n == 0 {
		return fresh()
	}
	b := (*from)[n-1]
	*from = (*from)[:n-1]
	return b
}

// arenaBlock is the size of the blocks Set copies rows and values into:
// appending to one growing buffer would copy everything at each growth.
const arenaBlock = 1 << 20

// cellBlock is how many cells one block of Importer.cells holds.
const cellBlock = 1 << 15

// copy returns a copy of b in the arena.
func (im *Importer) copy(b []byte) []byte {
	if len(b) > arenaBlock/4 {
		return slices.Clone(b)
	}
	if len(b) > cap(im.block)-len(im.block) {
		im.block = spare(&im.mem.arenas, func() []byte { return make([]byte, 0, arenaBlock) })[:0]
		im.arenas = append(im.arenas, im.block)
	}
	n := len(im.block)
	im.block = append(im.block, b...)
	return im.block[n:len(im.block):len(im.block)]
}

type importCell struct {
	table      string
	row, value []byte // in arena
	col        Column
}

// Import writes the cells fn sets as versions of one transaction that
// started at StartTs and committed at CommitTs (fresh timestamps unless
// opts gives them), exactly as its commit would have left them, with no
// lock and no notification. See the framework's DB.Import.
func (db *DB) Import(ctx context.Context, opts ImportOptions, fn func(ctx context.Context, im engine.Importer) error) error {
	if len(opts.Tables) == 0 {
		return fmt.Errorf("%w: Import: no tables", ErrInvalidOptions)
	}
	if opts.ChunkBytes <= 0 {
		return fmt.Errorf("%w: Import: ChunkBytes %d must be positive", ErrInvalidOptions, opts.ChunkBytes)
	}
	im := &Importer{db: db, ctx: ctx, opts: opts, tables: make(map[string]bool, len(opts.Tables)), noIngest: new(atomic.Bool), mem: &importMemory{}}
	for _, t := range opts.Tables {
		if err := engine.ValidateKey("Import", t, []byte{0}, Column{Family: "f"}); err != nil {
			return err
		}
		im.tables[t] = true
	}
	now, err := db.or.Timestamp(ctx)
	if err != nil {
		return fmt.Errorf("framework: import: %w", err)
	}
	switch {
	case opts.StartTs == 0 && opts.CommitTs == 0:
		if opts.Discard {
			return fmt.Errorf("%w: Import: Discard needs the timestamps of the import to discard", ErrInvalidOptions)
		}
		im.startTs = now
		if im.commitTs, err = db.or.Timestamp(ctx); err != nil {
			return fmt.Errorf("framework: import: %w", err)
		}
	case opts.StartTs == 0 || opts.CommitTs <= opts.StartTs || opts.CommitTs > protocol.MaxTs:
		return fmt.Errorf("%w: Import: timestamps %d, %d: want 0 < StartTs < CommitTs", ErrInvalidOptions, opts.StartTs, opts.CommitTs)
	case opts.CommitTs >= now:
		return fmt.Errorf("%w: Import: CommitTs %d was not drawn from this oracle (it is at %d)", ErrInvalidOptions, opts.CommitTs, now)
	default:
		im.startTs, im.commitTs = opts.StartTs, opts.CommitTs
	}
	if opts.Discard {
		return im.prepare(false)
	}
	if fn == nil {
		return fmt.Errorf("%w: Import: no function", ErrInvalidOptions)
	}
	err = fn(ctx, im)
	if werr := im.wait(); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	if err := im.prepare(true); err != nil {
		return err
	}
	return im.flush()
}

// StartTs is the start timestamp the import's versions carry.
func (im *Importer) StartTs() uint64 { return im.startTs }

// CommitTs is the commit timestamp the import's versions carry.
func (im *Importer) CommitTs() uint64 { return im.commitTs }

// Set buffers a write of value to the cell; row and value are copied.
// Once ChunkBytes are buffered, they are written before the first cell
// of another row: a chunk ends between rows, so that cells set in key
// order make chunks of disjoint key ranges (see the framework's
// ImportOptions.ChunkBytes).
func (im *Importer) Set(table string, row []byte, col Column, value []byte) error {
	if err := engine.ValidateKey("Import Set", table, row, col); err != nil {
		return err
	}
	if !im.tables[table] {
		return fmt.Errorf("%w: Import Set: table %q is not one of the import's Tables", ErrInvalidKey, table)
	}
	if im.buffered >= im.opts.ChunkBytes && !im.lastRowIs(table, row) {
		if err := im.prepare(true); err != nil {
			return err
		}
		if err := im.flushBehind(); err != nil {
			return err
		}
	}
	if n := len(im.cells); n == 0 || len(im.cells[n-1]) == cellBlock {
		im.cells = append(im.cells, spare(&im.mem.cells, func() []importCell { return make([]importCell, 0, cellBlock) })[:0])
	}
	last := &im.cells[len(im.cells)-1]
	*last = append(*last, importCell{table: table, col: col, row: im.copy(row), value: im.copy(value)})
	im.ncells++
	im.buffered += len(table) + len(row) + len(col.Family) + len(col.Qualifier) + len(value) + 64
	return nil
}

// lastRowIs reports whether the last buffered cell is in table's row.
func (im *Importer) lastRowIs(table string, row []byte) bool {
	if len(im.cells) == 0 {
		return false
	}
	b := im.cells[len(im.cells)-1]
	last := &b[len(b)-1]
	return last.table == table && bytes.Equal(last.row, row)
}

// flushBehind writes the buffered chunk in the background, after the one
// before it is written (whose error it returns), so that the caller
// computes the next chunk while this one is encoded, sorted and written:
// at most two chunks are held. (Writing two chunks at once was no faster
// on 2 cores.)
func (im *Importer) flushBehind() error {
	if err := im.wait(); err != nil {
		return err
	}
	chunk := &Importer{db: im.db, ctx: im.ctx, opts: im.opts, startTs: im.startTs, commitTs: im.commitTs,
		cells: im.cells, ncells: im.ncells, buffered: im.buffered, arenas: im.arenas, noIngest: im.noIngest,
		mem: im.mem, wmem: spare(&im.mem.writes, newWriteMemory)}
	im.cells, im.ncells, im.buffered, im.arenas = nil, 0, 0, nil
	im.block = nil // the chunk's values live in it; start a new one
	done := make(chan error, 1)
	im.writing, im.inflight = done, chunk
	go func() { done <- chunk.flush() }()
	return nil
}

// wait waits for the chunk being written in the background, if any,
// takes its memory back, and returns its error.
func (im *Importer) wait() error {
	if im.writing == nil {
		return nil
	}
	err := <-im.writing
	c := im.inflight
	if c.ingested {
		im.mem.cells = append(im.mem.cells, c.cells...)
		im.mem.arenas = append(im.mem.arenas, c.arenas...)
	}
	im.mem.writes = append(im.mem.writes, c.wmem)
	im.writing, im.inflight = nil, nil
	return err
}

func newWriteMemory() *writeMemory { return &writeMemory{} }

// prepare runs once, before the first write: it removes what an earlier
// import at the same timestamps left in the tables and, if strict, fails
// with ErrImportNotEmpty on any other cell.
func (im *Importer) prepare(strict bool) error {
	if im.prepared {
		return nil
	}
	for _, t := range im.opts.Tables {
		if err := im.clearTable(t, strict); err != nil {
			return err
		}
	}
	im.prepared = true
	return nil
}

// clearTable deletes the versions at the import's timestamps in every
// locality group of table, and in strict mode refuses any other cell.
func (im *Importer) clearTable(table string, strict bool) error {
	own := func(ts uint64) bool {
		return ts == protocol.Tag(protocol.KindWrite, im.commitTs) || ts == protocol.Tag(protocol.KindData, im.startTs)
	}
	for _, group := range []string{store.DefaultGroup, protocol.NotifyGroup} {
		var txns []*store.RowTxn
		flush := func() error {
			if len(txns) == 0 {
				return nil
			}
			_, err := im.db.st.ApplyAll(im.ctx, txns)
			txns = nil
			return err
		}
		for c, err := range im.db.st.Scan(im.ctx, store.ScanRequest{Table: table, Group: group}) {
			if err != nil {
				return fmt.Errorf("framework: import: scanning %s: %w", table, err)
			}
			if !own(c.Ts) {
				if strict {
					kind, ts := protocol.Untag(c.Ts)
					return fmt.Errorf("%w: %s/%q %s holds a %s record at %d", ErrImportNotEmpty, table, c.Row, c.Column, kind, ts)
				}
				continue
			}
			if n := len(txns); n == 0 || !bytes.Equal(txns[n-1].Row, c.Row) {
				if n == store.MaxApplyAll {
					if err := flush(); err != nil {
						return fmt.Errorf("framework: import: clearing %s: %w", table, err)
					}
				}
				txns = append(txns, &store.RowTxn{Table: table, Row: bytes.Clone(c.Row), NoSync: true})
			}
			t := txns[len(txns)-1]
			t.Mutations = append(t.Mutations, store.Mutation{Column: c.Column, Ts: c.Ts, Delete: true})
		}
		if len(txns) > 0 {
			txns[len(txns)-1].NoSync = false
		}
		if err := flush(); err != nil {
			return fmt.Errorf("framework: import: clearing %s: %w", table, err)
		}
	}
	return nil
}

// flush writes the buffered cells: as sstables if the store can ingest
// them, else with ApplyAll of at most store.MaxApplyAll rows a call, the
// last call synced.
func (im *Importer) flush() error {
	if im.ncells == 0 {
		return nil
	}
	blocks, n := im.cells, im.ncells
	err := errors.ErrUnsupported
	if ing, ok := im.db.st.(store.Ingester); ok && !im.noIngest.Load() {
		// The store sorts; it reports a cell set twice as a version
		// written twice.
		err = ing.Ingest(im.ctx, im.ingestTxns(blocks))
		im.ingested = err == nil
		if errors.Is(err, store.ErrInvalid) {
			err = fmt.Errorf("%w: Import Set: %w", ErrInvalidKey, err)
		}
		if errors.Is(err, errors.ErrUnsupported) {
			// It cannot ingest after all (a store served over NATS by a
			// service that cannot), having written nothing: this chunk
			// and the next ones are written with ApplyAll.
			im.noIngest.Store(true)
		}
	}
	if errors.Is(err, errors.ErrUnsupported) {
		err = im.applyAll(blocks, n)
	}
	if err != nil {
		return fmt.Errorf("framework: import: writing %d cells: %w", n, err)
	}
	im.ncells, im.buffered = 0, 0
	return nil
}

// applyAll writes the n cells of blocks with ApplyAll, sorted, at most
// store.MaxApplyAll rows a call, the last call synced.
func (im *Importer) applyAll(blocks [][]importCell, n int) error {
	cells := make([]importCell, 0, n)
	for _, b := range blocks {
		cells = append(cells, b...)
	}
	slices.SortFunc(cells, func(a, b importCell) int {
		if c := strings.Compare(a.table, b.table); c != 0 {
			return c
		}
		if c := bytes.Compare(a.row, b.row); c != 0 {
			return c
		}
		if c := strings.Compare(a.col.Family, b.col.Family); c != 0 {
			return c
		}
		return cmp.Compare(a.col.Qualifier, b.col.Qualifier)
	})
	for i := 1; i < len(cells); i++ {
		if p, c := &cells[i-1], &cells[i]; p.table == c.table && bytes.Equal(p.row, c.row) && p.col == c.col {
			return fmt.Errorf("%w: Import Set: %s/%q %s set twice", ErrInvalidKey, c.table, c.row, c.col)
		}
	}
	txns := appendPointers(nil, im.rowTxns(cells, &rowMemory{}))
	txns[len(txns)-1].NoSync = false
	for len(txns) > 0 {
		n := min(len(txns), store.MaxApplyAll)
		if _, err := im.db.st.ApplyAll(im.ctx, txns[:n]); err != nil {
			return err
		}
		txns = txns[n:]
	}
	return nil
}

// ingestTxns is rowTxns for a store that ingests, over the cells of
// blocks, built on every core: a chunk is a million cells, and its writing
// holds up the next. Adjacent cells of one row (cells set in key order)
// share a row transaction; the store sorts, so a row may come back in
// several.
//
// They are in im.wmem, which a later chunk reuses.
func (im *Importer) ingestTxns(blocks [][]importCell) []*store.RowTxn {
	if im.wmem == nil {
		im.wmem = spare(&im.mem.writes, newWriteMemory)
	}
	mem := im.wmem
	for len(mem.rows) < len(blocks) {
		mem.rows = append(mem.rows, rowMemory{})
	}
	per := make([][]store.RowTxn, len(blocks))
	workers := min(runtime.GOMAXPROCS(0), len(blocks))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(blocks); i += workers {
				per[i] = im.rowTxns(blocks[i], &mem.rows[i])
			}
		})
	}
	wg.Wait()
	mem.txns = mem.txns[:0]
	for _, rows := range per {
		mem.txns = appendPointers(mem.txns, rows)
	}
	return mem.txns
}

// appendPointers appends a pointer to each of rows to dst.
func appendPointers(dst []*store.RowTxn, rows []store.RowTxn) []*store.RowTxn {
	for i := range rows {
		dst = append(dst, &rows[i])
	}
	return dst
}

// rowTxns turns cells into the mutations a commit leaves: for each, a
// write record at CommitTs holding a short value inline, else pointing at
// a data record at StartTs. Adjacent cells of one row share one row
// transaction. They are built in mem's buffers, which a later call with
// mem overwrites.
func (im *Importer) rowTxns(cells []importCell, mem *rowMemory) []store.RowTxn {
	short := im.db.opts.ShortValueMax
	nmuts := len(cells)
	for i := range cells {
		if len(cells[i].value) > short {
			nmuts++
		}
	}
	if cap(mem.muts) < nmuts {
		mem.muts = make([]store.Mutation, 0, nmuts)
	}
	if cap(mem.rows) < len(cells) {
		mem.rows = make([]store.RowTxn, 0, len(cells))
	}
	muts, rows := mem.muts[:0], mem.rows[:0] // muts never grows: rows hold slices of it
	bufs := 0                                // mem.bufs in use
	var buf []byte
	for i := range cells {
		c := &cells[i]
		if len(rows) == 0 || rows[len(rows)-1].Table != c.table || !bytes.Equal(rows[len(rows)-1].Row, c.row) {
			rows = append(rows, store.RowTxn{Table: c.table, Row: c.row, NoSync: true, Mutations: muts[len(muts):len(muts)]})
		}
		w := protocol.Write{StartTs: im.startTs, Op: protocol.OpPut}
		if len(c.value) <= short {
			w.Inline, w.Value = true, c.value
		} else {
			muts = append(muts, store.Mutation{Column: c.col, Ts: protocol.Tag(protocol.KindData, im.startTs), Value: c.value})
		}
		if need := 10 + len(w.Value); need > cap(buf)-len(buf) {
			buf = mem.buf(bufs, need)
			bufs++
		}
		n := len(buf)
		buf = protocol.AppendWrite(buf, &w)
		muts = append(muts, store.Mutation{Column: c.col, Ts: protocol.Tag(protocol.KindWrite, im.commitTs), Value: buf[n:len(buf):len(buf)]})
		r := &rows[len(rows)-1]
		r.Mutations = r.Mutations[:len(r.Mutations)+1+boolInt(len(c.value) > short)]
	}
	return rows
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
