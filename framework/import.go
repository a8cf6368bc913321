package framework

import (
	"context"
	"fmt"

	"github.com/trickle-dev/trickle/internal/engine"
)

// ErrImportNotEmpty means DB.Import found a cell, other than one of its
// own, in a table it was to write: an import puts committed versions in
// place without reading what is there, so it is only for tables nothing
// else has written.
var ErrImportNotEmpty = engine.ErrImportNotEmpty

// ImportOptions configure DB.Import.
type ImportOptions struct {
	// Tables are the tables the import writes; Importer.Set refuses any
	// other. They must hold nothing but what an earlier import at the same
	// timestamps left (on TiKV, where versions do not say who wrote them,
	// the caller guarantees that nothing else wrote them since that
	// import's first write: see DB.Import). Required.
	Tables []string
	// StartTs and CommitTs are the timestamps of the import: those its
	// versions carry on the engine over a store; on TiKV, its name (see
	// DB.Import). Default: zero, meaning two fresh ones from the oracle.
	// To resume an import that failed (its process died, its store
	// stopped answering), pass the timestamps it reported
	// (Importer.StartTs and CommitTs, recorded by the caller before it
	// wrote anything): what it left in Tables is removed, then written
	// again.
	StartTs, CommitTs uint64
	// ChunkBytes is about how much Importer.Set buffers before it writes.
	// Each chunk is sorted and written as one step, in the background
	// while the next one is buffered, so an import holds up to two chunks.
	// A chunk ends between two rows, never inside one. Cells set table
	// by table, each table's rows in order, therefore make chunks of
	// disjoint key ranges, which a store that ingests (the pebble store)
	// links into its last level as they are; chunks that overlap are
	// compacted together afterwards. Order matters within a chunk too:
	// the pebble store writes a chunk whose rows come in key order (per
	// table) as it encodes it, and a chunk out of order is first
	// encoded whole and sorted, after the in-order attempt stops at its
	// first key out of order: up to twice the work. On TiKV a chunk is
	// a batch, one TiKV transaction of at most 8 MiB whatever
	// ChunkBytes says, and two are committed while the next is buffered.
	// Default: 32 MiB.
	ChunkBytes int
	// Discard, with StartTs and CommitTs, removes what the import at those
	// timestamps left in Tables and writes nothing (the function may be
	// nil): how a failed import is given up. Default: false.
	Discard bool
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *ImportOptions) EnsureDefaults() *ImportOptions {
	if o.ChunkBytes == 0 {
		o.ChunkBytes = 32 << 20
	}
	return o
}

// Validate reports the first unusable field, wrapping ErrInvalidOptions.
func (o *ImportOptions) Validate() error {
	switch {
	case len(o.Tables) == 0:
		return fmt.Errorf("%w: ImportOptions.Tables is empty", ErrInvalidOptions)
	case o.ChunkBytes < 0:
		return fmt.Errorf("%w: ImportOptions.ChunkBytes %d is negative", ErrInvalidOptions, o.ChunkBytes)
	case (o.StartTs == 0) != (o.CommitTs == 0):
		return fmt.Errorf("%w: ImportOptions: StartTs %d and CommitTs %d must be both set or both zero", ErrInvalidOptions, o.StartTs, o.CommitTs)
	case o.Discard && o.StartTs == 0:
		return fmt.Errorf("%w: ImportOptions.Discard needs the StartTs and CommitTs of the import to discard", ErrInvalidOptions)
	}
	return nil
}

// Importer receives the cells of an import (DB.Import). It is not safe
// for concurrent use.
type Importer struct{ im engine.Importer }

// StartTs is the start timestamp of the imported versions. A caller that
// may have to resume or discard the import records it, with CommitTs,
// before the first Set.
func (im *Importer) StartTs() uint64 { return im.im.StartTs() }

// CommitTs is the commit timestamp of the import: every snapshot from it
// on, drawn once a cell is written, reads the cell, and no snapshot below
// it reads any. It is below every timestamp the oracle hands out after
// Import called the function. (On TiKV the cells are committed by TiKV
// transactions of their own, all of them after CommitTs: see DB.Import.)
func (im *Importer) CommitTs() uint64 { return im.im.CommitTs() }

// Set writes value to the cell, as a committed transaction would have;
// row and value are copied. Cells are buffered and written a chunk at a
// time (ImportOptions.ChunkBytes), so Set may return a store's error. A
// cell set twice is an error (on TiKV, when set twice in one batch; in
// two, the first value stays).
func (im *Importer) Set(table string, row []byte, col Column, value []byte) error {
	return im.im.Set(table, row, col, value)
}

// Import writes data in bulk as committed data, with no lock left and no
// notification written. It is how a store is loaded with what a batch
// computation produced (Apache Fluo's bulk import): one sorted pass
// instead of a transaction per cell. It works on either engine:
//
//   - On the engine over a store (pebble, or a store served over NATS),
//     it is as if one transaction had written the import: every cell fn
//     sets becomes a committed version, with the data at StartTs and the
//     write record at CommitTs, laid out exactly as a commit lays them
//     out, written straight into the LSM when the store can ingest
//     sstables (the pebble store), else with ApplyAll.
//   - On TiKV, the cells are written in batches, each one TiKV
//     transaction that TiKV commits after CommitTs, each cell as an
//     insert, so that a cell a transaction wrote after Import's check is
//     kept (as on the other engine, where the imported version is the
//     older). StartTs and CommitTs name the import, whose check records
//     it beside the data before the first write. TiKV's versions do not
//     say who wrote them, so a resume or a discard of an import so
//     recorded deletes every cell of Tables (the caller's fence keeps
//     others out), and one of an import that never wrote deletes none.
//
// The cells are written after fn returns, or a chunk at a time as fn sets
// them. Before the first write, Import checks that ImportOptions.Tables
// hold nothing (ErrImportNotEmpty), apart from what a failed earlier
// attempt at the same timestamps left, which it removes. An error from
// fn, or from a write, leaves the chunks already written; resume with the
// same timestamps or give up with Discard.
//
// Writing bypasses transactions, so nothing protects a concurrent reader:
// on the engine over a store, a snapshot at or above CommitTs taken while
// Import writes sees part of the import, and more of it later; on TiKV,
// one sees the batches committed before it was drawn. Callers fence the
// tables off (no transaction reads or writes them until Import returns),
// or accept that.
// No observer runs for imported cells: no notification is written, and no
// strong observer's ack. A strong observer that decides what to do by
// comparing its input with state it keeps itself behaves as if it had run
// on the imported data when that state is imported with it; one that
// relies on its ack alone would treat the first later change of the cell
// as a change, which is also what it is.
func (db *DB) Import(ctx context.Context, opts *ImportOptions, fn func(ctx context.Context, im *Importer) error) error {
	var o ImportOptions
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return err
	}
	var efn func(context.Context, engine.Importer) error
	if fn != nil {
		efn = func(ctx context.Context, im engine.Importer) error { return fn(ctx, &Importer{im: im}) }
	}
	return db.engine().Import(ctx, engine.ImportOptions{
		Tables: o.Tables, StartTs: o.StartTs, CommitTs: o.CommitTs, ChunkBytes: o.ChunkBytes, Discard: o.Discard,
	}, efn)
}
