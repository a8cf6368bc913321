package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/trickle-dev/trickle/store/internal/keys"
)

// IngestFileBytes is about how large each sstable Ingest builds grows
// before it starts the next one: large enough that a big import is a few
// files, small enough that compactions of ingested files stay short.
const IngestFileBytes = 64 << 20

// ingestSeq numbers the sstables Ingest builds, so that concurrent calls
// never write the same file.
var ingestSeq atomic.Uint64

// Ingest writes the mutations of txns into the store by building sorted
// sstables and linking them into the LSM: no write-ahead log, no memtable,
// no row latches, one atomic step for the whole call. Loading a large
// amount of data that nobody else writes (a bulk import of committed
// versions at timestamps of its own) costs a sort and one pass of
// sequential writes, instead of a batch per few thousand rows that is
// logged, then flushed, then compacted.
//
// Row transactions must carry no Checks, and mutations only writes (no
// Delete, no IfValuePrefix): Ingest evaluates nothing. Rows may repeat
// across txns, but one version (row, column, ts) may be written only once;
// a bad request fails the whole call with an *InvalidError naming it
// (txns[2].Mutations[0]) and nothing is written. A version already stored
// is replaced, as Apply would replace it: the caller is expected to write
// timestamps nobody else uses. The data is durable when Ingest returns
// (the sstables are synced before they are linked).
func (db *DB) Ingest(ctx context.Context, txns []*RowTxn) error {
	const op = "Ingest"
	type kv struct{ key, value []byte }
	n := 0
	for i, txn := range txns {
		if txn == nil {
			return invalid(op, indexed("txns", i, ""), "nil")
		}
		if err := validateTableRow(op, indexed("txns", i, ".Table"), txn.Table, indexed("txns", i, ".Row"), txn.Row); err != nil {
			return err
		}
		if len(txn.Checks) > 0 {
			return invalid(op, indexed("txns", i, ".Checks"), "Ingest evaluates no checks")
		}
		for j := range txn.Mutations {
			m := &txn.Mutations[j]
			field := func() string { return indexed("txns", i, indexed(".Mutations", j, "")) }
			switch {
			case m.Column.Family == "":
				return invalid(op, field()+".Column", "empty family")
			case m.Delete:
				return invalid(op, field()+".Delete", "Ingest only writes")
			case m.IfValuePrefix != nil:
				return invalid(op, field()+".IfValuePrefix", "Ingest writes unconditionally")
			}
		}
		n += len(txn.Mutations)
	}
	if n == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()

	// Encode every key into one arena, then sort.
	kvs := make([]kv, 0, n)
	size := 0
	for _, txn := range txns {
		for j := range txn.Mutations {
			m := &txn.Mutations[j]
			size += 1 + 2*(len(txn.Table)+len(txn.Row)+len(m.Column.Family)+len(m.Column.Qualifier)) + 8 + keys.TsLen
		}
	}
	arena := make([]byte, 0, size)
	for _, txn := range txns {
		for j := range txn.Mutations {
			m := &txn.Mutations[j]
			start := len(arena)
			arena = keys.AppendEncode(arena, keys.Key{
				Group: db.layout.groupOf(m.Column.Family), Table: txn.Table, Row: txn.Row,
				Family: m.Column.Family, Qualifier: m.Column.Qualifier, Ts: m.Ts,
			})
			kvs = append(kvs, kv{key: arena[start:len(arena):len(arena)], value: m.Value})
		}
	}
	slices.SortFunc(kvs, func(a, b kv) int { return bytes.Compare(a.key, b.key) })
	for i := 1; i < len(kvs); i++ {
		if bytes.Equal(kvs[i-1].key, kvs[i].key) {
			k, _ := keys.Decode(kvs[i].key)
			return invalid(op, "txns", "version %d of %s/%q %s:%s is written twice", k.Ts, k.Table, k.Row, k.Family, k.Qualifier)
		}
	}

	paths, err := db.writeSSTables(ctx, func(yield func(key, value []byte) bool) {
		for _, e := range kvs {
			if !yield(e.key, e.value) {
				return
			}
		}
	})
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		if err = db.pdb.Ingest(ctx, paths); err == nil {
			return nil // Ingest removed the files
		}
		err = fmt.Errorf("store: ingesting %d sstables: %w", len(paths), err)
	}
	for _, p := range paths {
		if rerr := db.popts.FS.Remove(p); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			db.log.Warn("store: removing an sstable built for ingestion", "path", p, "err", rerr)
		}
	}
	return err
}

// writeSSTables writes the sorted key/value pairs of kvs into sstables of
// about IngestFileBytes each, next to the store's files, and returns their
// paths; on error, the paths of the files it made so far (for removal).
func (db *DB) writeSSTables(ctx context.Context, kvs func(yield func(key, value []byte) bool)) ([]string, error) {
	fs := db.popts.FS
	wo := db.popts.MakeWriterOptions(0, db.pdb.TableFormat())
	var paths []string
	var w *sstable.Writer
	finish := func() error {
		if w == nil {
			return nil
		}
		err := w.Close()
		w = nil
		if err != nil {
			return fmt.Errorf("store: finishing an sstable for ingestion: %w", err)
		}
		return nil
	}
	var werr error
	for key, value := range kvs {
		if w == nil {
			if err := ctx.Err(); err != nil {
				werr = err
				break
			}
			p := fs.PathJoin(db.dir, fmt.Sprintf("ingest-%d.sst.tmp", ingestSeq.Add(1)))
			f, err := fs.Create(p, "")
			if err != nil {
				werr = fmt.Errorf("store: creating an sstable for ingestion: %w", err)
				break
			}
			paths = append(paths, p)
			w = sstable.NewWriter(objstorageprovider.NewFileWritable(f), wo)
		}
		if err := w.Set(key, value); err != nil {
			werr = fmt.Errorf("store: writing an sstable for ingestion: %w", err)
			break
		}
		if w.Raw().EstimatedSize() >= IngestFileBytes {
			if werr = finish(); werr != nil {
				break
			}
		}
	}
	if werr != nil {
		if w != nil {
			w.Close()
		}
		return paths, werr
	}
	return paths, finish()
}
