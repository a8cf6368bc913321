package tikvengine

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/keys"
	"github.com/trickle-dev/trickle/internal/tikvcall"
	"github.com/trickle-dev/trickle/store"
)

// Limits of an import's batches: TiKV refuses an entry over 6 MiB and a
// transaction over 100 MiB by default (TiDB's txn-entry-size-limit and
// txn-total-size-limit, which TiKV's raft-entry-max-size of 8 MiB sits
// between), and a batch is held in memory twice (here and in client-go's
// buffer) while it is written.
const (
	// maxImportBatch caps ImportOptions.ChunkBytes: a batch ends between
	// two rows once it holds this much.
	maxImportBatch = 8 << 20
	// maxImportBatchHard bounds a batch that one large row made longer:
	// the row is split across batches.
	maxImportBatchHard = 2 * maxImportBatch
	// maxEntry is the largest cell (its key and framed value) a
	// transaction or an import writes: TiKV's default entry limit.
	maxEntry = 6 << 20
	// importWriters is how many batches are committed at once while the
	// function buffers the next.
	importWriters = 2
)

// ErrTooLarge (engine.ErrTooLarge) is returned by a Set, a transaction's
// or an import's, for a cell TiKV would refuse (over its default entry
// limit of 6 MiB), before anything is written, so that the caller learns
// which cell instead of a commit's failure; and by a commit over
// client-go's transaction size limit.
var ErrTooLarge = engine.ErrTooLarge

// Import writes the cells fn sets into opts.Tables as committed data, in
// batches that are each one TiKV transaction (async commit and 1PC as
// Options say) of about min(ChunkBytes, 8 MiB), ending between rows (a
// longer row is split so that no batch exceeds 16 MiB), two committed at
// a time while fn buffers the next; it writes no notification. What it
// means on TiKV:
//
//   - StartTs and CommitTs are two PD timestamps (StartTs < CommitTs)
//     drawn before fn is called, unless opts gives them: they name the
//     import, so that a caller records them before its first Set to
//     resume or discard it. TiKV chooses each batch's commit timestamp,
//     later than CommitTs: no snapshot below CommitTs reads an imported
//     cell; a snapshot drawn after Import returns reads them all; one
//     drawn while it writes reads the batches committed before it, whole,
//     and never more of the import later (snapshot isolation holds, where
//     on the pebble engine such a snapshot sees the import appear).
//   - Before the first write, one transaction reads the first key of each
//     table's data range (key-only, limit 1), failing with
//     engine.ErrImportNotEmpty naming it, and writes the import's record
//     (a key of its own range holding StartTs and CommitTs): from then on
//     the import may have written.
//   - A cell is written as an insert (TiKV's "presume the key does not
//     exist"): one that a transaction committed after the check is kept
//     and the import's value dropped, as on the pebble engine, where the
//     imported version is older than any other and hidden by it. A
//     deletion committed after the check does not hide the imported cell,
//     unlike there. So is a cell fn sets twice in different batches (the
//     first value stays); twice in one batch is an error.
//   - "The tables hold nothing but what an earlier import at the same
//     timestamps left" means here: that import's record exists, and the
//     caller guarantees (a fence) that nothing but that import wrote the
//     tables since its check. TiKV's versions do not say who wrote them,
//     so a resume (opts.StartTs and CommitTs given) whose record exists
//     deletes everything in the tables' data ranges, in batched
//     transactions, then imports as a new import does; one without a
//     record (the earlier attempt stopped before its first write) imports
//     as a new one, refusing tables that are not empty. Discard deletes
//     everything in the tables if the record exists, then the record, and
//     otherwise changes nothing. The record stays after a complete import,
//     so that Discard removes a complete import too.
//
// Each request is bounded by ctx and Options.RequestTimeout; a batch that
// conflicts (a lock or write in its way) is committed again as Transact
// retries, up to Options.MaxAttempts. An error leaves the batches
// committed before it.
func (db *DB) Import(ctx context.Context, opts engine.ImportOptions, fn func(context.Context, engine.Importer) error) error {
	ctx, span := db.tracer.Start(ctx, "import")
	defer span.End()
	im, err := db.newImporter(ctx, opts)
	if err == nil {
		err = im.run(fn)
		span.SetAttributes(attribute.Int64("batches", im.batches.Load()), attribute.Int64("kept", im.kept.Load()))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

// importer is the engine.Importer of one import.
type importer struct {
	db                *DB
	ctx               context.Context
	opts              engine.ImportOptions
	startTs, commitTs uint64
	tables            map[string]bool
	limit             int // min(ChunkBytes, maxImportBatch)
	prepared          bool

	cur     *importBatch
	scratch []byte // the cell being set, encoded
	last    []byte // the key of the last cell set
	lastRow int    // the length of its row prefix

	slots chan struct{} // one per batch being committed
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error          // the first error of a batch
	spare []*importBatch // batches committed, for reuse
	// batches counts the batches committed; kept counts the cells found
	// written by others, whose imported value was dropped.
	batches, kept atomic.Int64
}

// The engine whose transactions are TiKV's imports through the seam.
var _ engine.Importer = (*importer)(nil)

func (db *DB) newImporter(ctx context.Context, opts engine.ImportOptions) (*importer, error) {
	if len(opts.Tables) == 0 {
		return nil, fmt.Errorf("%w: Import: no tables", engine.ErrInvalidOptions)
	}
	if opts.ChunkBytes <= 0 {
		return nil, fmt.Errorf("%w: Import: ChunkBytes %d must be positive", engine.ErrInvalidOptions, opts.ChunkBytes)
	}
	im := &importer{db: db, ctx: ctx, opts: opts, tables: make(map[string]bool, len(opts.Tables)),
		limit: min(opts.ChunkBytes, maxImportBatch), slots: make(chan struct{}, importWriters)}
	for _, t := range opts.Tables {
		if err := engine.ValidateTable("Import", t); err != nil {
			return nil, err
		}
		im.tables[t] = true
	}
	now, err := db.timestamp(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case opts.StartTs == 0 && opts.CommitTs == 0:
		if opts.Discard {
			return nil, fmt.Errorf("%w: Import: Discard needs the timestamps of the import to discard", engine.ErrInvalidOptions)
		}
		im.startTs = now
		if im.commitTs, err = db.timestamp(ctx); err != nil {
			return nil, err
		}
	case opts.StartTs == 0 || opts.CommitTs <= opts.StartTs:
		return nil, fmt.Errorf("%w: Import: timestamps %d, %d: want 0 < StartTs < CommitTs", engine.ErrInvalidOptions, opts.StartTs, opts.CommitTs)
	case opts.CommitTs >= now:
		return nil, fmt.Errorf("%w: Import: CommitTs %d was not drawn from this cluster's PD (it is at %d)", engine.ErrInvalidOptions, opts.CommitTs, now)
	default:
		im.startTs, im.commitTs = opts.StartTs, opts.CommitTs
	}
	im.cur = &importBatch{}
	return im, nil
}

// run discards, or runs fn and writes what it set.
func (im *importer) run(fn func(context.Context, engine.Importer) error) error {
	if im.opts.Discard {
		return im.db.discardImport(im.ctx, im.opts.Tables, im.startTs, im.commitTs)
	}
	if fn == nil {
		return fmt.Errorf("%w: Import: no function", engine.ErrInvalidOptions)
	}
	err := fn(im.ctx, im)
	if err == nil {
		err = im.prepare()
	}
	if err == nil {
		err = im.flush()
	}
	if werr := im.wait(); err == nil {
		err = werr
	}
	if n := im.kept.Load(); n > 0 && err == nil {
		im.db.opts.Logger.Warn("tikvengine: import: cells already written were kept, the import's values dropped",
			"cells", n, "start_ts", im.startTs, "commit_ts", im.commitTs)
	}
	return err
}

// StartTs is the import's start timestamp, which names it (see Import).
func (im *importer) StartTs() uint64 { return im.startTs }

// CommitTs is the import's commit timestamp: every batch commits after it
// (see Import).
func (im *importer) CommitTs() uint64 { return im.commitTs }

// Set buffers the cell; once the batch holds the import's limit, it is
// committed in the background before the first cell of another row.
func (im *importer) Set(table string, row []byte, col store.Column, value []byte) error {
	if err := engine.ValidateKey("Import Set", table, row, col); err != nil {
		return err
	}
	if !im.tables[table] {
		return fmt.Errorf("%w: Import Set: table %q is not one of the import's Tables", engine.ErrInvalidKey, table)
	}
	k := keys.AppendRowPrefix(append(im.scratch[:0], im.db.codec.ns...), dataRange, table, row)
	rowLen := len(k)
	k = keys.AppendColumnSuffix(k, col.Family, col.Qualifier)
	keyLen := len(k)
	im.scratch = tikvcall.AppendFrame(k, value)
	size := len(im.scratch)
	if size > maxEntry {
		return fmt.Errorf("%w: Import Set: %s/%q %s is %d bytes (key and value), over TiKV's entry limit of %d", ErrTooLarge, table, row, col, size, maxEntry)
	}
	key := im.scratch[:keyLen]
	if bytes.Equal(key, im.last) {
		return fmt.Errorf("%w: Import Set: %s/%q %s set twice", engine.ErrInvalidKey, table, row, col)
	}
	newRow := !bytes.Equal(key[:rowLen], im.last[:min(im.lastRow, len(im.last))])
	if b := im.cur; len(b.cells) > 0 && ((b.size() >= im.limit && newRow) || b.size()+size > maxImportBatchHard) {
		if err := im.prepare(); err != nil {
			return err
		}
		if err := im.flush(); err != nil {
			return err
		}
	}
	im.cur.add(im.scratch, keyLen)
	im.last, im.lastRow = append(im.last[:0], key...), rowLen
	return nil
}

// prepare runs once, before the first write: a resume or a discard first
// removes what the import left, then the tables' emptiness is checked and
// the import's record written (see Import).
func (im *importer) prepare() error {
	if im.prepared {
		return nil
	}
	if im.opts.StartTs != 0 {
		ok, err := im.db.importRecorded(im.ctx, im.startTs, im.commitTs)
		if err != nil {
			return err
		}
		if ok {
			if err := im.db.clearTables(im.ctx, im.opts.Tables); err != nil {
				return err
			}
		}
	}
	if err := im.db.checkAndRecord(im.ctx, im.opts.Tables, im.startTs, im.commitTs); err != nil {
		return err
	}
	im.prepared = true
	return nil
}

// flush hands the buffered batch to a writer, waiting while
// importWriters batches are being committed, and returns the first error
// of a batch committed before.
func (im *importer) flush() error {
	if err := im.failed(); err != nil {
		return err
	}
	b := im.cur
	if len(b.cells) == 0 {
		return nil
	}
	select {
	case im.slots <- struct{}{}:
	case <-im.ctx.Done():
		return fmt.Errorf("tikvengine: import: %w", context.Cause(im.ctx))
	}
	im.mu.Lock()
	if n := len(im.spare); n > 0 {
		im.cur, im.spare = im.spare[n-1], im.spare[:n-1]
	} else {
		im.cur = &importBatch{}
	}
	im.mu.Unlock()
	im.wg.Go(func() {
		err := im.db.writeBatch(im.ctx, b, &im.kept)
		im.mu.Lock()
		if err != nil && im.err == nil {
			im.err = err
		}
		if err == nil {
			im.batches.Add(1)
		}
		b.reset()
		im.spare = append(im.spare, b)
		im.mu.Unlock()
		<-im.slots
	})
	return nil
}

// failed returns the first error of a batch.
func (im *importer) failed() error {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.err
}

// wait waits for the batches being committed and returns the first error
// of any.
func (im *importer) wait() error {
	im.wg.Wait()
	return im.failed()
}

// importBatch is the cells of one batch, their keys and framed values
// back to back in one buffer.
type importBatch struct {
	buf   []byte
	cells []importCell
}

// importCell locates a cell in its batch's buffer: the key is
// buf[start:value], the framed value buf[value:end].
type importCell struct{ start, value, end int }

func (b *importBatch) add(kv []byte, keyLen int) {
	n := len(b.buf)
	b.buf = append(b.buf, kv...)
	b.cells = append(b.cells, importCell{n, n + keyLen, len(b.buf)})
}

// size is what the batch weighs in a TiKV transaction: its keys and
// values.
func (b *importBatch) size() int { return len(b.buf) }

func (b *importBatch) key(c importCell) []byte   { return b.buf[c.start:c.value:c.value] }
func (b *importBatch) value(c importCell) []byte { return b.buf[c.value:c.end:c.end] }

// drop removes the cell of key k from the batch, reporting whether it was
// there.
func (b *importBatch) drop(k []byte) bool {
	for i, c := range b.cells {
		if bytes.Equal(b.key(c), k) {
			b.cells = append(b.cells[:i], b.cells[i+1:]...)
			return true
		}
	}
	return false
}

func (b *importBatch) reset() { b.buf, b.cells = b.buf[:0], b.cells[:0] }
