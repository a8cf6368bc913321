// Package protocol is the Percolator transaction protocol as plain data and
// decisions: how protocol records are laid out in the store, which row
// transactions each protocol step issues, and what a reader or committer must
// do given what it found. It performs no I/O; the engine (internal/percolator)
// drives it against a store and an oracle.
//
// Layout. Every user column (family:qualifier) keeps all of its protocol
// metadata in the same store column, distinguished by a Kind tag in the top
// four bits of the store timestamp (the same trick Apache Fluo uses). Because
// store versions sort newest first, a column's cells are laid out as
//
//	the lock, Write versions, Rollback versions, Data versions
//
// each group newest first. A cell has at most one lock at a time (prewrite
// refuses to lock a locked cell), so the lock lives at one fixed version,
// LockTs, and names its transaction in its value, as in TiKV's lock column
// family. Had each lock its own version, every commit would leave a
// tombstone at a new key, and every later check of the cell would have to
// step over all of them until compaction. A snapshot read needs one seek:
// the first cell at or after LockTs is the lock, if any, else the newest
// write record.
package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/trickle-dev/trickle/internal/codec"
	"github.com/trickle-dev/trickle/store"
)

// Kind tags a store timestamp with the protocol record it holds.
type Kind uint8

// Record kinds, in the order they sort within a column (highest first).
const (
	KindData     Kind = 1 // the value written by the transaction that started at ts
	KindRollback Kind = 2 // the transaction that started at ts was rolled back
	KindWrite    Kind = 3 // a commit record at commit ts pointing at its start ts
	KindLock     Kind = 4 // an uncommitted write by the transaction that started at ts
)

func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindRollback:
		return "rollback"
	case KindWrite:
		return "write"
	case KindLock:
		return "lock"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

const kindShift = 60

// MaxTs is the largest transaction timestamp that can be tagged.
const MaxTs = uint64(1)<<kindShift - 1

// Tag places a record of kind k at transaction timestamp ts.
func Tag(k Kind, ts uint64) uint64 { return uint64(k)<<kindShift | ts&MaxTs }

// Untag splits a store timestamp into its kind and transaction timestamp.
func Untag(storeTs uint64) (Kind, uint64) { return Kind(storeTs >> kindShift), storeTs & MaxTs }

// Op is what a transaction did to a cell.
type Op uint8

// Operations recorded in locks and write records.
const (
	OpPut    Op = 1
	OpDelete Op = 2
)

func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Key addresses one user cell.
type Key struct {
	Table  string
	Row    []byte
	Column store.Column
}

func (k Key) String() string { return fmt.Sprintf("%s/%q/%s", k.Table, k.Row, k.Column) }

// LockTs is the store version every lock is kept at.
var LockTs = Tag(KindLock, 0)

// Lock is the content of a lock record: an uncommitted write.
type Lock struct {
	// StartTs identifies the transaction; it leads the encoding so that
	// checks can match a lock to its transaction by value prefix.
	StartTs uint64
	// Primary is the cell whose commit decides this transaction's fate.
	Primary Key
	Op      Op
	// Inline is set when the value travels in the lock (short values) rather
	// than in a data record at the start timestamp.
	Inline bool
	Value  []byte
	// WallMs is the oracle-clock time (ms) the TTL counts from: the physical
	// part of the start timestamp.
	WallMs int64
	// TTLMs is how long after WallMs the lock may be considered abandoned;
	// heartbeats extend it.
	TTLMs int64
	// Holder is the worker that owns the transaction, for liveness checks.
	Holder string
	// Secondaries is the number of other cells the transaction locks; only
	// set on the primary (diagnostics).
	Secondaries int
}

// ErrCorrupt is returned for records that cannot be decoded.
var ErrCorrupt = errors.New("protocol: corrupt record")

const lockVersion = 1

// EncodeLock serializes a lock record.
func EncodeLock(l *Lock) []byte {
	b := make([]byte, 0, 72+len(l.Primary.Table)+len(l.Primary.Row)+len(l.Value)+len(l.Holder))
	b = binary.BigEndian.AppendUint64(b, l.StartTs)
	b = append(b, lockVersion, byte(l.Op))
	flags := byte(0)
	if l.Inline {
		flags |= 1
	}
	b = append(b, flags)
	b = appendBytes(b, []byte(l.Primary.Table))
	b = appendBytes(b, l.Primary.Row)
	b = appendBytes(b, []byte(l.Primary.Column.Family))
	b = appendBytes(b, []byte(l.Primary.Column.Qualifier))
	b = binary.AppendVarint(b, l.WallMs)
	b = binary.AppendVarint(b, l.TTLMs)
	b = appendBytes(b, []byte(l.Holder))
	b = binary.AppendUvarint(b, uint64(l.Secondaries))
	b = appendBytes(b, l.Value)
	return b
}

// DecodeLock parses a lock record.
func DecodeLock(b []byte) (*Lock, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%w: lock of %d bytes", ErrCorrupt, len(b))
	}
	d := codec.NewReader(b[8:])
	if v := d.Byte(); v != lockVersion {
		return nil, fmt.Errorf("%w: lock version %d", ErrCorrupt, v)
	}
	clone := func() []byte { return bytes.Clone(d.Bytes()) }
	l := &Lock{StartTs: binary.BigEndian.Uint64(b), Op: Op(d.Byte())}
	l.Inline = d.Byte()&1 != 0
	l.Primary.Table = d.String()
	l.Primary.Row = clone()
	l.Primary.Column.Family = d.String()
	l.Primary.Column.Qualifier = d.String()
	l.WallMs = d.Varint()
	l.TTLMs = d.Varint()
	l.Holder = d.String()
	l.Secondaries = int(d.Uvarint())
	l.Value = clone()
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("%w: lock: %w", ErrCorrupt, err)
	}
	return l, nil
}

// Expired reports whether the lock's TTL has run out at oracle time nowMs.
func (l *Lock) Expired(nowMs int64) bool { return nowMs > l.WallMs+l.TTLMs }

// Write is the content of a write (commit) record.
type Write struct {
	StartTs uint64
	Op      Op
	Inline  bool
	Value   []byte
}

// StartTsPrefix is the value prefix of every lock and write record of the
// transaction that started at startTs; checks use it to ask "is this lock
// ours?" and "did this transaction commit here?".
func StartTsPrefix(startTs uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, startTs)
}

// EncodeWrite serializes a write record.
func EncodeWrite(w *Write) []byte {
	return AppendWrite(make([]byte, 0, 10+len(w.Value)), w)
}

// AppendWrite appends the encoding of w to b: EncodeWrite without an
// allocation per record, for writers of many (an import).
func AppendWrite(b []byte, w *Write) []byte {
	b = binary.BigEndian.AppendUint64(b, w.StartTs)
	flags := byte(0)
	if w.Inline {
		flags |= 1
	}
	b = append(b, byte(w.Op), flags)
	return append(b, w.Value...)
}

// DecodeWrite parses a write record.
func DecodeWrite(b []byte) (*Write, error) {
	if len(b) < 10 {
		return nil, fmt.Errorf("%w: write record of %d bytes", ErrCorrupt, len(b))
	}
	w := &Write{StartTs: binary.BigEndian.Uint64(b), Op: Op(b[8]), Inline: b[9]&1 != 0}
	if w.Op != OpPut && w.Op != OpDelete {
		return nil, fmt.Errorf("%w: write op %d", ErrCorrupt, b[8])
	}
	if len(b) > 10 {
		w.Value = append([]byte(nil), b[10:]...)
	}
	return w, nil
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}
