package tikvengine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	tikverr "github.com/tikv/client-go/v2/error"
	"github.com/tikv/client-go/v2/kv"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/txnkv/transaction"
	"github.com/tikv/client-go/v2/txnkv/txnsnapshot"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvcall"
)

// The TiKV transactions of an import (see Import): its batches, the check
// and record before its first write, and the deletions of a resume or a
// discard. None reads what it writes but the check, and none writes a
// notification.

// writeBatch commits b as one transaction, again after a conflict (as
// Transact does) and without each cell that turns out to be written
// already (counted in kept).
func (db *DB) writeBatch(ctx context.Context, b *importBatch, kept *atomic.Int64) error {
	for {
		err := db.retrying(ctx, func(ctx context.Context) error { return db.commitBatch(ctx, b) })
		var exists *tikverr.ErrKeyExist
		if !errors.As(err, &exists) || !b.drop(exists.GetKey()) {
			return err
		}
		kept.Add(1)
		if len(b.cells) == 0 {
			return nil
		}
	}
}

// commitBatch makes one attempt at committing b, each cell an insert.
func (db *DB) commitBatch(ctx context.Context, b *importBatch) error {
	ctx, cancel := db.deadline(ctx)
	defer cancel()
	txn, done, err := db.beginImport(ctx)
	if err != nil {
		return err
	}
	defer done()
	mb := txn.GetMemBuffer()
	for _, c := range b.cells {
		if err := mb.SetWithFlags(b.key(c), b.value(c), kv.SetPresumeKeyNotExists); err != nil {
			txn.Rollback()
			return fail("import: buffering a batch", err)
		}
	}
	if txn.Len() != len(b.cells) {
		txn.Rollback()
		return db.setTwice(b)
	}
	if err := txn.Commit(ctx); err != nil {
		return failIn(ctx, fmt.Sprintf("import: committing a batch of %d cells (%d bytes)", len(b.cells), b.size()), err)
	}
	db.counts.importBatches.Add(1)
	return nil
}

// setTwice returns the error naming a cell set twice in b.
func (db *DB) setTwice(b *importBatch) error {
	ks := make([][]byte, len(b.cells))
	for i, c := range b.cells {
		ks[i] = b.key(c)
	}
	slices.SortFunc(ks, bytes.Compare)
	for i := 1; i < len(ks); i++ {
		if bytes.Equal(ks[i-1], ks[i]) {
			var scratch []byte
			row, col, err := db.codec.cellOf(ks[i], &scratch, false)
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: Import Set: %q %s set twice", engine.ErrInvalidKey, row, col)
		}
	}
	return fmt.Errorf("tikvengine: import: a batch of %d cells buffered fewer", len(b.cells))
}

// beginImport begins a transaction of an import at a fresh timestamp,
// committed as Options say, and returns the function to call once it is
// done with.
func (db *DB) beginImport(ctx context.Context) (*transaction.KVTxn, func(), error) {
	ts, end, err := db.start(ctx, 0)
	if err != nil {
		return nil, nil, err
	}
	txn, err := db.kv.Begin(tikvclient.WithStartTS(ts))
	if err != nil {
		end()
		return nil, nil, fail("import: beginning a transaction", err)
	}
	txn.SetEnableAsyncCommit(!db.opts.DisableAsyncCommit)
	txn.SetEnable1PC(!db.opts.Disable1PC)
	return txn, end, nil
}

// retrying runs fn as engine.Retry says, with the DB's attempts and
// backoff: Transact's attempts and an import's batches.
func (db *DB) retrying(ctx context.Context, fn func(context.Context) error) error {
	return engine.Retry(ctx, db.opts.MaxAttempts, db.opts.RetryBackoffMin, db.opts.RetryBackoffMax, func(int) error { return fn(ctx) })
}

// importRecorded reports whether the record of the import at startTs and
// commitTs exists: whether it may have written.
func (db *DB) importRecorded(ctx context.Context, startTs, commitTs uint64) (bool, error) {
	ctx, cancel := db.deadline(ctx)
	defer cancel()
	ts, err := db.timestamp(ctx)
	if err != nil {
		return false, err
	}
	snap, stop := db.snapshot(ctx, ts)
	defer stop()
	_, err = snap.Get(ctx, db.codec.importKey(startTs, commitTs))
	switch {
	case tikverr.IsErrNotFound(err):
		return false, nil
	case err != nil:
		return false, failIn(ctx, "import: reading its record", err)
	}
	return true, nil
}

// checkAndRecord fails with engine.ErrImportNotEmpty, naming the first
// cell, if a table holds one in the snapshot of a transaction that
// otherwise writes the import's record.
func (db *DB) checkAndRecord(ctx context.Context, tables []string, startTs, commitTs uint64) error {
	return db.retrying(ctx, func(ctx context.Context) error {
		ctx, cancel := db.deadline(ctx)
		defer cancel()
		txn, done, err := db.beginImport(ctx)
		if err != nil {
			return err
		}
		defer done()
		snap, stop := db.snapshot(ctx, txn.StartTS())
		defer stop()
		snap.SetKeyOnly(true)
		snap.SetScanBatchSize(1)
		for _, t := range tables {
			lower, upper := db.codec.rowBounds(dataRange, t, nil, nil)
			k, err := firstKey(snap, lower, upper)
			if err != nil {
				txn.Rollback()
				return failIn(ctx, "import: checking that "+t+" is empty", err)
			}
			if k != nil {
				txn.Rollback()
				var scratch []byte
				row, col, err := db.codec.cellOf(k, &scratch, false)
				if err != nil {
					return err
				}
				return fmt.Errorf("%w: %s/%q %s", engine.ErrImportNotEmpty, t, row, col)
			}
		}
		if err := txn.Set(db.codec.importKey(startTs, commitTs), tikvcall.Frame(nil)); err != nil {
			txn.Rollback()
			return fail("import: recording it", err)
		}
		if err := txn.Commit(ctx); err != nil {
			return failIn(ctx, "import: recording it", err)
		}
		return nil
	})
}

// firstKey returns the first key in [lower, upper) of snap, nil if there
// is none.
func firstKey(snap *txnsnapshot.KVSnapshot, lower, upper []byte) ([]byte, error) {
	it, err := snap.Iter(lower, upper)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	if !it.Valid() {
		return nil, nil
	}
	return bytes.Clone(it.Key()), nil
}

// discardImport deletes what the import at startTs and commitTs left in
// tables, then its record, if it has one (see Import).
func (db *DB) discardImport(ctx context.Context, tables []string, startTs, commitTs uint64) error {
	ok, err := db.importRecorded(ctx, startTs, commitTs)
	if err != nil || !ok {
		return err
	}
	if err := db.clearTables(ctx, tables); err != nil {
		return err
	}
	return db.retrying(ctx, func(ctx context.Context) error {
		ctx, cancel := db.deadline(ctx)
		defer cancel()
		txn, done, err := db.beginImport(ctx)
		if err != nil {
			return err
		}
		defer done()
		if err := txn.Delete(db.codec.importKey(startTs, commitTs)); err != nil {
			txn.Rollback()
			return fail("import: deleting its record", err)
		}
		if err := txn.Commit(ctx); err != nil {
			return failIn(ctx, "import: deleting its record", err)
		}
		return nil
	})
}

// clearTables deletes every cell of tables, in transactions of at most
// maxImportBatch bytes of keys, each reading the keys it deletes
// (key-only) in its own snapshot.
func (db *DB) clearTables(ctx context.Context, tables []string) error {
	for _, t := range tables {
		lower, upper := db.codec.rowBounds(dataRange, t, nil, nil)
		for lower != nil {
			err := db.retrying(ctx, func(ctx context.Context) error {
				next, err := db.clearBatch(ctx, lower, upper)
				if err == nil {
					lower = next
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("tikvengine: import: clearing %s: %w", t, err)
			}
		}
	}
	return nil
}

// clearBatch deletes the keys from lower on, up to upper or
// maxImportBatch bytes of them, in one transaction, and returns the key
// to go on from (nil: upper was reached).
func (db *DB) clearBatch(ctx context.Context, lower, upper []byte) ([]byte, error) {
	ctx, cancel := db.deadline(ctx)
	defer cancel()
	txn, done, err := db.beginImport(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	snap, stop := db.snapshot(ctx, txn.StartTS())
	defer stop()
	snap.SetKeyOnly(true)
	it, err := snap.Iter(lower, upper)
	if err != nil {
		txn.Rollback()
		return nil, failIn(ctx, "import: scanning", err)
	}
	defer it.Close()
	for size := 0; it.Valid() && size < maxImportBatch; {
		size += len(it.Key())
		if err := txn.Delete(it.Key()); err != nil { // copied into the buffer
			txn.Rollback()
			return nil, fail("import: deleting", err)
		}
		if err := it.Next(); err != nil {
			txn.Rollback()
			return nil, failIn(ctx, "import: scanning", err)
		}
	}
	var next []byte
	if it.Valid() {
		next = bytes.Clone(it.Key())
	}
	if txn.Len() == 0 {
		txn.Rollback()
		return next, nil
	}
	if err := txn.Commit(ctx); err != nil {
		return nil, failIn(ctx, "import: deleting", err)
	}
	return next, nil
}
