package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"

	"github.com/trickle-dev/trickle/internal/keys"
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
			case m.SingleDelete:
				return invalid(op, field()+".SingleDelete", "Ingest only writes")
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

	// An import passes its rows in key order: each range of the request
	// is then written as it is encoded, on a core of its own. Anything
	// else is encoded whole and sorted first.
	all, err := db.writeInOrder(ctx, txns, n)
	if errors.Is(err, errOutOfOrder) {
		db.removeFiles(all)
		if db.hooks.sortedIngest != nil {
			db.hooks.sortedIngest()
		}
		all, err = db.writeSorted(ctx, txns, n)
	}
	if err == nil {
		err = ctx.Err()
	}
	if err == nil {
		if err = db.pdb.Ingest(ctx, all); err == nil {
			return nil // Ingest removed the files
		}
		err = fmt.Errorf("store: ingesting %d sstables: %w", len(all), err)
	}
	db.removeFiles(all)
	return err
}

// removeFiles removes the sstables at paths, built for an ingest that
// did not happen.
func (db *DB) removeFiles(paths []string) {
	for _, p := range paths {
		if err := db.popts.FS.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			db.log.Warn("store: removing an sstable built for ingestion", "path", p, "err", err)
		}
	}
}

// writeSorted writes the n mutations of txns, in any order, into
// sstables: it encodes them all, sorts them, and writes contiguous ranges
// of the sorted keys (which do not overlap) to files of their own, on
// every core. A version written twice is an *InvalidError.
func (db *DB) writeSorted(ctx context.Context, txns []*RowTxn, n int) ([]string, error) {
	kvs := db.encodeSorted(txns, n)
	for i := 1; i < len(kvs); i++ {
		if bytes.Equal(kvs[i-1].key, kvs[i].key) {
			k, _ := keys.Decode(kvs[i].key)
			return nil, invalid("Ingest", "txns", "version %d of %s/%q %s:%s is written twice", k.Ts, k.Table, k.Row, k.Family, k.Qualifier)
		}
	}
	parts := max(1, min(runtime.GOMAXPROCS(0), len(kvs)/65536))
	paths := make([][]string, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for w := range parts {
		wg.Go(func() {
			part := kvs[w*len(kvs)/parts : (w+1)*len(kvs)/parts]
			paths[w], errs[w] = db.writeSSTables(ctx, func(yield func(key, value []byte) bool) {
				for _, e := range part {
					if !yield(e.key, e.value) {
						return
					}
				}
			})
		})
	}
	wg.Wait()
	return slices.Concat(paths...), errors.Join(errs...)
}

// writeSSTables writes the sorted key/value pairs of kvs into sstables of
// about IngestFileBytes each, one table of one locality group per file,
// next to the store's files, and returns their paths; on error, the paths
// of the files it made so far (for removal).
func (db *DB) writeSSTables(ctx context.Context, kvs func(yield func(key, value []byte) bool)) ([]string, error) {
	fs := db.popts.FS
	wo := db.popts.MakeWriterOptions(0, db.pdb.TableFormat())
	wo.DisableValueBlocks = true // as in flushes and compactions: see inPlaceValues
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
	var table []byte // the group and table prefix of the file being written
	for key, value := range kvs {
		// A file holds one table of one locality group. An import passes
		// a table's rows in order, in all its groups at once, and may
		// pass several tables at once: a file spanning two groups or
		// tables would overlap the next call's files of both.
		if len(table) == 0 || !bytes.HasPrefix(key, table) {
			end, err := keys.ParseTable(key)
			if err != nil {
				werr = fmt.Errorf("store: writing an sstable for ingestion: %w", err)
				break
			}
			if werr = finish(); werr != nil {
				break
			}
			table = append(table[:0], key[:end]...)
		}
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

// kv is an encoded key and its value.
type kv struct{ key, value []byte }

// encodeSorted encodes the n mutations of txns and returns them sorted by
// key, using every core: the keys of an import are many and long.
func (db *DB) encodeSorted(txns []*RowTxn, n int) []kv {
	workers := max(1, min(runtime.GOMAXPROCS(0), n/4096))
	parts := make([][]kv, workers)
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(txns)/workers, (w+1)*len(txns)/workers
		wg.Go(func() {
			size, m := 0, 0
			for _, txn := range txns[lo:hi] {
				for j := range txn.Mutations {
					mu := &txn.Mutations[j]
					// Exact unless a segment holds a zero byte (escaped
					// in two): the arena then grows, and keys already
					// encoded keep the memory they are in.
					size += 1 + len(txn.Table) + len(txn.Row) + len(mu.Column.Family) + len(mu.Column.Qualifier) + 8 + keys.TsLen
				}
				m += len(txn.Mutations)
			}
			arena := make([]byte, 0, size)
			part := make([]kv, 0, m)
			for _, txn := range txns[lo:hi] {
				for j := range txn.Mutations {
					mu := &txn.Mutations[j]
					start := len(arena)
					arena = appendMutationKey(arena, db.layout.GroupOf(mu.Column.Family), txn, mu, mu.Ts)
					part = append(part, kv{key: arena[start:len(arena):len(arena)], value: mu.Value})
				}
			}
			sortKVs(part)
			parts[w] = part
		})
	}
	wg.Wait()
	for len(parts) > 1 { // merge pairwise
		// next has its length before the merges start: each writes its
		// own element (appending while they ran lost merged runs).
		next := make([][]kv, (len(parts)+1)/2)
		var mwg sync.WaitGroup
		for i := 0; i < len(parts); i += 2 {
			if i+1 == len(parts) {
				next[i/2] = parts[i]
				continue
			}
			a, b := parts[i], parts[i+1]
			mwg.Go(func() { next[i/2] = mergeKVs(a, b) })
		}
		mwg.Wait()
		parts = next
	}
	return parts[0]
}

// sortKVs sorts kvs by key, unless they are in order already (as an
// import passes them).
func sortKVs(kvs []kv) {
	if cmp := func(a, b kv) int { return bytes.Compare(a.key, b.key) }; !slices.IsSortedFunc(kvs, cmp) {
		slices.SortFunc(kvs, cmp)
	}
}

// appendMutationKey appends the key of m, a mutation of txn in group g,
// at ts.
func appendMutationKey(dst []byte, g keys.Group, txn *RowTxn, m *Mutation, ts uint64) []byte {
	return keys.AppendEncode(dst, keys.Key{
		Group: g, Table: txn.Table, Row: txn.Row,
		Family: m.Column.Family, Qualifier: m.Column.Qualifier, Ts: ts,
	})
}

// mergeKVs merges two sorted runs.
func mergeKVs(a, b []kv) []kv {
	out := make([]kv, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if bytes.Compare(a[0].key, b[0].key) <= 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}
