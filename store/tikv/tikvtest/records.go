package tikvtest

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/tikv/client-go/v2/testutils"
	"github.com/tikv/client-go/v2/util/codec"
)

// records reads and writes single records of the mock's MVCC store where
// its interface has no call for it: whose transaction a key's lock or a
// version's record belongs to, and putting back a record a request
// overwrote (see rollbacks). They rely on the layout of client-go's
// mock (a record is stored under the key encoded as bytes followed by its
// version descending, a lock at the highest version; a lock's value
// begins with its start timestamp, a write's with its type and start
// timestamp, little-endian), which TestTheMockRecordLayout pins.
type records struct {
	raw interface {
		RawGet(cf string, key []byte) []byte
		RawPut(cf string, key, value []byte)
	}
	debug interface {
		MvccGetByKey(key []byte) *kvrpcpb.MvccInfo
	}
}

// The mock's write types, as it numbers them.
const (
	recordPut      = 0
	recordDelete   = 1
	recordRollback = 2
	recordLock     = 3
)

func newRecords(mvcc testutils.MVCCStore) (records, error) {
	var r records
	var ok bool
	if r.raw, ok = mvcc.(interface {
		RawGet(cf string, key []byte) []byte
		RawPut(cf string, key, value []byte)
	}); !ok {
		return r, fmt.Errorf("tikvtest: the mock's store (%T) has no raw access", mvcc)
	}
	if r.debug, ok = mvcc.(interface {
		MvccGetByKey(key []byte) *kvrpcpb.MvccInfo
	}); !ok {
		return r, fmt.Errorf("tikvtest: the mock's store (%T) cannot be read by key", mvcc)
	}
	return r, nil
}

// versionKey is where the mock stores key's record at version ts.
func versionKey(key []byte, ts uint64) []byte {
	return codec.EncodeUintDesc(codec.EncodeBytes(nil, key), ts)
}

// at returns the raw record of key at version ts (its write committed or
// rolled back at ts), nil if there is none.
func (r records) at(key []byte, ts uint64) []byte {
	return r.raw.RawGet("", versionKey(key, ts))
}

// put stores a raw record of key at version ts, as at returned it.
func (r records) put(key []byte, ts uint64, rec []byte) {
	r.raw.RawPut("", versionKey(key, ts), rec)
}

// writeOf decodes the type and start timestamp of a raw write record.
func writeOf(rec []byte) (typ int64, startTS uint64, ok bool) {
	if len(rec) < 16 {
		return 0, 0, false
	}
	return int64(binary.LittleEndian.Uint64(rec)), binary.LittleEndian.Uint64(rec[8:]), true
}

// lockOn returns the start timestamp of the lock on key, ok false if key
// is not locked.
func (r records) lockOn(key []byte) (startTS uint64, ok bool) {
	rec := r.raw.RawGet("", versionKey(key, math.MaxUint64))
	if len(rec) < 8 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(rec), true
}

// info returns all the mock holds for key: its lock and its writes, newest
// first.
func (r records) info(key []byte) *kvrpcpb.MvccInfo {
	if i := r.debug.MvccGetByKey(key); i != nil {
		return i
	}
	return &kvrpcpb.MvccInfo{}
}
