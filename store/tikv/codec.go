package tikv

import (
	"errors"
	"fmt"

	"github.com/trickle-dev/trickle/internal/keys"
	"github.com/trickle-dev/trickle/store"
)

// The key space of a store is its namespace prefix (the namespace and a
// 0x00 byte) followed by a key of package keys. The namespace holds no
// 0x00, so no namespace prefix is a prefix of another and stores of
// different namespaces share a cluster without sharing a key. Below
// keys.MetaGroup the store keeps its own keys: the persisted group layout
// and the rows' guard keys.

// Meta key kinds, after the namespace prefix and keys.MetaGroup.
const (
	metaGuard  = 'g' // guard keys: metaGuard esc(table) esc(row)
	metaLayout = 'l' // the persisted group layout
)

// errCorrupt reports bytes in the store's key range that it did not write.
var errCorrupt = errors.New("store/tikv: corrupt data")

// codec builds the keys of one namespace.
type codec struct {
	ns []byte // namespace prefix: the namespace and 0x00
}

func newCodec(namespace string) codec {
	return codec{ns: append([]byte(namespace), 0)}
}

// cellKey appends the key of a cell version.
func (c codec) cellKey(dst []byte, g keys.Group, table string, row []byte, col store.Column, ts uint64) []byte {
	return keys.AppendEncode(append(dst, c.ns...), keys.Key{Group: g, Table: table, Row: row,
		Family: col.Family, Qualifier: col.Qualifier, Ts: ts})
}

// columnPrefix appends the prefix of every version of a column.
func (c codec) columnPrefix(dst []byte, g keys.Group, table string, row []byte, col store.Column) []byte {
	return keys.AppendColumnPrefix(append(dst, c.ns...), g, table, row, col.Family, col.Qualifier)
}

// versionRange returns the key range [lo, hi) of the versions of a column
// with minTs <= ts <= maxTs; versions are stored newest first.
func (c codec) versionRange(g keys.Group, table string, row []byte, col store.Column, minTs, maxTs uint64) (lo, hi []byte) {
	p := c.columnPrefix(nil, g, table, row, col)
	lo = keys.AppendTs(p, maxTs)
	hi = append(keys.AppendTs(p[:len(p):len(p)], minTs), 0)
	return lo, hi
}

// guardKey is the key every row transaction that writes the row locks.
func (c codec) guardKey(table string, row []byte) []byte {
	k := append(append([]byte(nil), c.ns...), byte(keys.MetaGroup))
	return keys.AppendRowPrefix(k, metaGuard, table, row)
}

// layoutKey is the key of the persisted group layout.
func (c codec) layoutKey() []byte {
	return append(append([]byte(nil), c.ns...), byte(keys.MetaGroup), metaLayout)
}

// groupPrefix is the prefix of every key of group g.
func (c codec) groupPrefix(g keys.Group) []byte {
	return append(append([]byte(nil), c.ns...), byte(g))
}

// strip returns key without the namespace prefix.
func (c codec) strip(key []byte) ([]byte, error) {
	if len(key) < len(c.ns) || string(key[:len(c.ns)]) != string(c.ns) {
		return nil, fmt.Errorf("%w: key %x outside namespace %q", errCorrupt, key, c.ns[:len(c.ns)-1])
	}
	return key[len(c.ns):], nil
}

// decodeTs returns the timestamp of a cell key.
func decodeTs(key []byte) uint64 { return keys.DecodeTs(key) }
