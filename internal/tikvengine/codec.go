package tikvengine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/trickle-dev/trickle/internal/keys"
	"github.com/trickle-dev/trickle/store"
)

// The key ranges after the namespace prefix (see the package doc).
const (
	dataRange   keys.Group = 0x01
	notifyRange keys.Group = 0x02
	ackRange    keys.Group = 0x03
	importRange keys.Group = 0x04
)

// ErrCorrupt reports bytes in the engine's key range that it did not
// write.
var ErrCorrupt = errors.New("tikvengine: corrupt data")

// codec builds the keys of one namespace.
type codec struct {
	ns []byte // the namespace and 0x00
}

func newCodec(namespace string) codec { return codec{ns: append([]byte(namespace), 0)} }

// dataKey is the key of a cell.
func (c codec) dataKey(table string, row []byte, col store.Column) []byte {
	return keys.AppendColumnPrefix(slices.Clone(c.ns), dataRange, table, row, col.Family, col.Qualifier)
}

// rowPrefix is the prefix of the keys of a row's cells; a column's
// suffix (columnSuffix) completes it into the cell's key.
func (c codec) rowPrefix(table string, row []byte) []byte {
	return keys.AppendRowPrefix(slices.Clone(c.ns), dataRange, table, row)
}

// columnSuffix is the part of a cell's key after its row's prefix.
func (c codec) columnSuffix(col store.Column) []byte {
	return keys.AppendColumnSuffix(nil, col.Family, col.Qualifier)
}

// notifyPrefix is the prefix of every notification key of a cell.
func (c codec) notifyPrefix(table string, row []byte, col store.Column) []byte {
	return keys.AppendColumnPrefix(slices.Clone(c.ns), notifyRange, table, row, col.Family, col.Qualifier)
}

// notifyKey is the notification a write of the transaction that started
// at ts leaves for a cell.
func (c codec) notifyKey(table string, row []byte, col store.Column, ts uint64) []byte {
	return keys.AppendTs(c.notifyPrefix(table, row, col), ts)
}

// ackKey is the key of observer's ack for a cell.
func (c codec) ackKey(observer string, table string, row []byte, col store.Column) []byte {
	k := keys.AppendColumnPrefix(slices.Clone(c.ns), ackRange, table, row, col.Family, col.Qualifier)
	return keys.AppendFamilySuffix(k, observer)
}

// importKey is the record of the import named by startTs and commitTs
// (see Import).
func (c codec) importKey(startTs, commitTs uint64) []byte {
	k := append(slices.Clone(c.ns), byte(importRange))
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(k, startTs), commitTs)
}

// rowBounds returns the key range [lower, upper) of the rows of table in
// [start, end) (nil: unbounded) in range g.
func (c codec) rowBounds(g keys.Group, table string, start, end []byte) (lower, upper []byte) {
	tablePrefix := keys.AppendTablePrefix(slices.Clone(c.ns), g, table)
	lower, upper = tablePrefix, keys.PrefixSuccessor(tablePrefix)
	if start != nil {
		lower = keys.AppendRowPrefix(slices.Clone(c.ns), g, table, start)
	}
	if end != nil {
		upper = keys.AppendRowPrefix(slices.Clone(c.ns), g, table, end)
	}
	return lower, upper
}

// strip returns key without the namespace prefix.
func (c codec) strip(key []byte) ([]byte, error) {
	if len(key) < len(c.ns) || string(key[:len(c.ns)]) != string(c.ns) {
		return nil, fmt.Errorf("%w: key %x outside namespace %q", ErrCorrupt, key, c.ns[:len(c.ns)-1])
	}
	return key[len(c.ns):], nil
}

// cellOf decodes a data key (or a notification key, whose timestamp it
// ignores) into its row and column. scratch is reused between calls: data
// keys have no timestamp, and keys.Parse wants one.
func (c codec) cellOf(key []byte, scratch *[]byte, timestamped bool) (row []byte, col store.Column, err error) {
	k, err := c.strip(key)
	if err != nil {
		return nil, col, err
	}
	if !timestamped {
		*scratch = append(append((*scratch)[:0], k...), make([]byte, keys.TsLen)...)
		k = *scratch
	}
	l, err := keys.Parse(k)
	if err != nil {
		return nil, col, fmt.Errorf("%w: key %x: %v", ErrCorrupt, key, err)
	}
	row = keys.AppendUnescaped(nil, k[l.TableEnd:l.RowEnd])
	col = store.Column{
		Family:    keys.UnescapeString(k[l.RowEnd:l.FamilyEnd]),
		Qualifier: keys.UnescapeString(k[l.FamilyEnd:l.QualifierEnd]),
	}
	return row, col, nil
}

// RowKey returns the first key of the cells of a row of table in the
// engine's key range of namespace (Options.Namespace): where a cluster
// splits to put rows in regions of their own, as tests and soaks on a
// mock cluster do so that transactions span regions.
func RowKey(namespace, table string, row []byte) []byte {
	return keys.AppendRowPrefix(newCodec(namespace).ns, dataRange, table, row)
}
