package tikvtest

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/pingcap/goleveldb/leveldb"
	"github.com/pingcap/goleveldb/leveldb/opt"
	"github.com/pingcap/goleveldb/leveldb/storage"
	"github.com/tikv/client-go/v2/testutils"
)

// The mock keeps its versions in an in-memory goleveldb opened with
// goleveldb's defaults: 4 MiB memtables flushed into snappy-compressed
// tables, compacted as on disk. Compressing memory saves nothing here, and
// flushing, compressing, compacting and decompressing took over a fifth
// of a web index load's CPU, most of the mock's share, none of it work a
// TiKV server's CPU resembles. tuneStorage gives the mock a store without
// compression and with memtables large enough that a test's data rarely
// leaves them.
//
// client-go opens the store itself and exposes no options, so tuneStorage
// replaces it, before anything is written, by its field (the mock's
// defaultCf store, the one every request reads and writes), failing
// loudly if client-go's layout ever changes.
func tuneStorage(mvcc testutils.MVCCStore) error {
	v := reflect.ValueOf(mvcc)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("tikvtest: the mock's store is a %T, not the leveldb one this package tunes", mvcc)
	}
	f := v.Elem().FieldByName("dbs")
	if !f.IsValid() || f.Type() != reflect.TypeFor[map[string]*leveldb.DB]() {
		return fmt.Errorf("tikvtest: the mock's store %T has no map of leveldb stores to tune", mvcc)
	}
	dbs := *(*map[string]*leveldb.DB)(unsafe.Pointer(f.UnsafeAddr()))
	if len(dbs) != 1 {
		return fmt.Errorf("tikvtest: the mock's store has %d leveldb stores, want its one", len(dbs))
	}
	db, err := leveldb.Open(storage.NewMemStorage(), &opt.Options{
		Compression:                   opt.NoCompression,
		WriteBuffer:                   16 << 20,
		CompactionTableSize:           8 << 20,
		CompactionTotalSizeMultiplier: 4,
		BlockCacheCapacity:            64 << 20,
	})
	if err != nil {
		return fmt.Errorf("tikvtest: opening the mock's store: %w", err)
	}
	for cf, old := range dbs {
		dbs[cf] = db
		old.Close()
	}
	return nil
}
