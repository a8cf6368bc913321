// Package keys is the order-preserving codec between store tuples
// (group, table, row, family, qualifier, ts) and pebble keys.
//
// An encoded key is
//
//	[group byte][esc(table)][esc(row)][esc(family)][esc(qualifier)][^ts, 8 bytes big-endian]
//
// where esc(b) replaces every 0x00 in b by 0x00 0xFF and appends the
// terminator 0x00 0x01. The terminator sorts below any continuation of the
// segment (0x00 0xFF for an escaped zero, or any byte >= 0x01), so a segment
// sorts before every longer segment it is a prefix of, and escaped segments
// are prefix-free: no esc(a) is a proper prefix of esc(b). Together these make
// bytes.Compare on encoded keys agree with comparing tuples field by field,
// and make every prefix built here (group+table, +row, +column) cover exactly
// the keys of that table, row or column. The timestamp is stored inverted so
// that, within a column, the newest version comes first.
package keys

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

// Group is the first byte of every key. It separates locality groups so that
// a group is one contiguous key range that can be scanned without touching
// any other group.
type Group byte

// Reserved and well-known group ids.
const (
	// MetaGroup holds the store's own metadata (e.g. the persisted group
	// layout). Its keys do not follow the tuple layout.
	MetaGroup Group = 0x00
	// DefaultGroup holds every family that is not mapped elsewhere.
	DefaultGroup Group = 0x01
	// FirstExtraGroup is the id of the first additional, user-named group;
	// later ones follow in order. (Stores made before groups had no
	// reserved names kept the framework's notify group here, and the
	// persisted layout of such a store still says so.)
	FirstExtraGroup Group = 0x02
)

// TsLen is the length of the encoded timestamp suffix.
const TsLen = 8

// Key is a decoded store key. Row is nil only when it was empty.
type Key struct {
	Group     Group
	Table     string
	Row       []byte
	Family    string
	Qualifier string
	Ts        uint64
}

// ErrMalformed is returned when bytes are not a valid encoded key.
var ErrMalformed = errors.New("keys: malformed key")

// appendEsc appends esc(s) to dst. It finds zero bytes with IndexByte
// (vectorized) and copies the runs between them whole: every key a store
// reads or writes is encoded, most hold no zero byte at all, and a byte
// loop over a long row or qualifier was a tenth of an import's CPU.
func appendEsc(dst []byte, s string) []byte {
	for {
		i := strings.IndexByte(s, 0x00)
		if i < 0 {
			return append(append(dst, s...), 0x00, 0x01)
		}
		dst = append(append(dst, s[:i]...), 0x00, 0xFF)
		s = s[i+1:]
	}
}

// appendEscBytes is appendEsc of a byte slice, read in place as a string:
// appendEsc only reads s and copies it out, so no copy need be made.
func appendEscBytes(dst []byte, s []byte) []byte {
	return appendEsc(dst, unsafe.String(unsafe.SliceData(s), len(s)))
}

// AppendTs appends the 8-byte inverted big-endian encoding of ts, so that
// larger timestamps sort first.
func AppendTs(dst []byte, ts uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, ^ts)
}

// DecodeTs decodes the timestamp suffix of an encoded key. The key must be at
// least TsLen bytes long (any key accepted by Parse is).
func DecodeTs(key []byte) uint64 {
	return ^binary.BigEndian.Uint64(key[len(key)-TsLen:])
}

// AppendTablePrefix appends the prefix shared by every key of table in group.
func AppendTablePrefix(dst []byte, g Group, table string) []byte {
	return appendEsc(append(dst, byte(g)), table)
}

// AppendRowPrefix appends the prefix shared by every key of row.
func AppendRowPrefix(dst []byte, g Group, table string, row []byte) []byte {
	return appendEscBytes(AppendTablePrefix(dst, g, table), row)
}

// AppendColumnPrefix appends the prefix shared by every version of a column
// of row; appending AppendTs to it gives a full key.
func AppendColumnPrefix(dst []byte, g Group, table string, row []byte, family, qualifier string) []byte {
	return AppendColumnSuffix(AppendRowPrefix(dst, g, table, row), family, qualifier)
}

// AppendColumnSuffix appends esc(family) esc(qualifier): the part of a column
// prefix that follows the row prefix. Scans use it to jump between columns of
// a row.
func AppendColumnSuffix(dst []byte, family, qualifier string) []byte {
	return appendEsc(appendEsc(dst, family), qualifier)
}

// AppendFamilySuffix appends esc(family): every column of the family in a row
// has rowPrefix+AppendFamilySuffix as prefix.
func AppendFamilySuffix(dst []byte, family string) []byte {
	return appendEsc(dst, family)
}

// Encode returns the encoded key of k.
func Encode(k Key) []byte {
	n := 1 + len(k.Table) + len(k.Row) + len(k.Family) + len(k.Qualifier) + 8 + TsLen
	return AppendEncode(make([]byte, 0, n), k)
}

// AppendEncode appends the encoded key of k to dst.
func AppendEncode(dst []byte, k Key) []byte {
	dst = AppendColumnPrefix(dst, k.Group, k.Table, k.Row, k.Family, k.Qualifier)
	return AppendTs(dst, k.Ts)
}

// PrefixSuccessor returns the smallest key that is greater than every key
// having prefix p, for use as an exclusive upper bound. It returns nil (no
// bound) if p is empty or all 0xFF.
func PrefixSuccessor(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xFF {
			s := make([]byte, i+1)
			copy(s, p)
			s[i]++
			return s
		}
	}
	return nil
}

// Layout gives the end offsets (exclusive, terminator included) of the
// escaped segments of an encoded key, so callers can compare raw prefixes
// (same row? same column?) without decoding.
type Layout struct {
	TableEnd     int
	RowEnd       int
	FamilyEnd    int
	QualifierEnd int // also where the timestamp starts
}

// segEnd returns the offset just past the terminator of the escaped segment
// starting at off.
func segEnd(b []byte, off int) (int, error) {
	for i := off; i < len(b); i++ {
		if b[i] != 0x00 {
			continue
		}
		if i+1 >= len(b) {
			return 0, fmt.Errorf("%w: truncated escape at %d", ErrMalformed, i)
		}
		switch b[i+1] {
		case 0x01:
			return i + 2, nil
		case 0xFF:
			i++
		default:
			return 0, fmt.Errorf("%w: bad escape 0x00 0x%02x at %d", ErrMalformed, b[i+1], i)
		}
	}
	return 0, fmt.Errorf("%w: unterminated segment at %d", ErrMalformed, off)
}

// ParseTable returns the end offset of the table segment, so that key[:end]
// is the table prefix. It accepts any key whose table segment is well formed.
func ParseTable(key []byte) (end int, err error) {
	if len(key) < 1 {
		return 0, fmt.Errorf("%w: empty", ErrMalformed)
	}
	return segEnd(key, 1)
}

// Parse validates an encoded key and returns its layout.
func Parse(key []byte) (Layout, error) {
	var l Layout
	var err error
	if l.TableEnd, err = ParseTable(key); err != nil {
		return l, err
	}
	if l.RowEnd, err = segEnd(key, l.TableEnd); err != nil {
		return l, err
	}
	if l.FamilyEnd, err = segEnd(key, l.RowEnd); err != nil {
		return l, err
	}
	if l.QualifierEnd, err = segEnd(key, l.FamilyEnd); err != nil {
		return l, err
	}
	if len(key)-l.QualifierEnd != TsLen {
		return l, fmt.Errorf("%w: %d bytes after qualifier, want %d", ErrMalformed, len(key)-l.QualifierEnd, TsLen)
	}
	return l, nil
}

// AppendUnescaped appends the raw bytes of an escaped segment (terminator
// included) to dst. The segment must come from a key accepted by Parse or
// ParseTable.
func AppendUnescaped(dst, seg []byte) []byte {
	seg = seg[:len(seg)-2] // drop terminator
	for {
		i := bytes.IndexByte(seg, 0x00)
		if i < 0 {
			return append(dst, seg...)
		}
		dst = append(dst, seg[:i+1]...)
		seg = seg[i+2:]
	}
}

// UnescapeString returns the raw bytes of an escaped segment as a string.
func UnescapeString(seg []byte) string {
	if bytes.IndexByte(seg[:len(seg)-2], 0x00) < 0 {
		return string(seg[:len(seg)-2])
	}
	return string(AppendUnescaped(nil, seg))
}

// Decode parses an encoded key. The returned Key does not alias b.
func Decode(b []byte) (Key, error) {
	l, err := Parse(b)
	if err != nil {
		return Key{}, err
	}
	k := Key{
		Group:     Group(b[0]),
		Table:     UnescapeString(b[1:l.TableEnd]),
		Row:       AppendUnescaped(nil, b[l.TableEnd:l.RowEnd]),
		Family:    UnescapeString(b[l.RowEnd:l.FamilyEnd]),
		Qualifier: UnescapeString(b[l.FamilyEnd:l.QualifierEnd]),
		Ts:        DecodeTs(b),
	}
	return k, nil
}

// Compare orders keys as their encodings do: by group, table, row, family and
// qualifier ascending, then by timestamp descending. It is the specification
// the encoding is tested against.
func Compare(a, b Key) int {
	if c := cmp.Compare(a.Group, b.Group); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Table, b.Table); c != 0 {
		return c
	}
	if c := bytes.Compare(a.Row, b.Row); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Family, b.Family); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Qualifier, b.Qualifier); c != 0 {
		return c
	}
	return cmp.Compare(b.Ts, a.Ts) // newest first
}

// Split returns the length of the column prefix of key: the offset just past
// the fourth escaped segment (the qualifier) that follows the leading group
// byte, so that key[:Split(key)] is the column and key[Split(key):] is the
// timestamp suffix. For any byte string that does not start with a group
// byte and four well-formed segments (metadata keys, and bounds or seek
// targets that stop short of a column, such as row prefixes or prefix
// successors) it returns len(key): the whole string is a prefix with an
// empty suffix.
//
// Split is total: it accepts any byte string, not only keys the store
// writes. Because a column prefix is prefix-free (no column prefix is a
// proper prefix of another, and a string that extends a column prefix is
// itself split at that prefix), comparing two byte strings as (prefix,
// suffix) pairs, each part bytewise, always agrees with bytes.Compare on the
// whole strings. That is what lets the store's pebble comparer keep bytewise
// order while telling pebble where the timestamp starts (for prefix bloom
// filters and SeekPrefixGE), whatever keys pebble itself derives (index
// separators, successors) or receives as bounds.
func Split(key []byte) int {
	n, _ := splitColumn(key)
	return n
}

// IsColumnPrefix reports whether p is exactly a column prefix (a group byte
// and four well-formed segments, nothing after them).
func IsColumnPrefix(p []byte) bool {
	n, ok := splitColumn(p)
	return ok && n == len(p)
}

// splitColumn returns the end of the column prefix of key and true, or
// len(key) and false if key does not start with a column prefix.
func splitColumn(key []byte) (int, bool) {
	if len(key) == 0 {
		return 0, false
	}
	off := 1
	for range 4 {
		for {
			i := bytes.IndexByte(key[off:], 0x00)
			if i < 0 {
				return len(key), false
			}
			off += i + 2
			if off > len(key) {
				return len(key), false
			}
			b := key[off-1]
			if b == 0x01 {
				break
			}
			if b != 0xFF {
				return len(key), false
			}
		}
	}
	return off, true
}
