package schema

import (
	"encoding/binary"
	"fmt"
)

// Decoder reads the fields of the index's encodings, which are written
// with encoding/binary's Append functions and AppendString: varints, big-endian
// 8-byte integers and uvarint-length-prefixed strings. It remembers the first problem; after
// it every read returns a zero value, so a decode reads every field and
// checks Err once, and no stored garbage can make it panic. The index
// needs no more than these reads, so it keeps its own small reader
// rather than depend on the engine's wire codec.
type Decoder struct {
	b   []byte
	err error
}

func NewDecoder(b []byte) Decoder { return Decoder{b: b} }

// Err returns the first problem met, wrapping ErrCorrupt, or nil.
func (d *Decoder) Err() error { return d.err }

// Len returns how many bytes are left.
func (d *Decoder) Len() int { return len(d.b) }

// Fail records err unless a problem was met already, and stops the
// decoder: later reads return zero values.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err, d.b = err, nil
	}
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 { return readVarint(d, binary.Uvarint, "uvarint") }

// Varint reads a signed varint.
func (d *Decoder) Varint() int64 { return readVarint(d, binary.Varint, "varint") }

func readVarint[T int64 | uint64](d *Decoder, read func([]byte) (T, int), what string) T {
	v, n := read(d.b)
	if n <= 0 {
		d.Fail(fmt.Errorf("%w: truncated or malformed %s", ErrCorrupt, what))
		return 0
	}
	d.b = d.b[n:]
	return v
}

// U64 reads a big-endian 8-byte integer.
func (d *Decoder) U64() uint64 {
	if len(d.b) < 8 {
		d.Fail(fmt.Errorf("%w: 8-byte integer in %d bytes", ErrCorrupt, len(d.b)))
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// String reads a uvarint length and that many bytes.
func (d *Decoder) String() string {
	n := d.Uvarint()
	if n > uint64(len(d.b)) {
		d.Fail(fmt.Errorf("%w: string of %d bytes in %d", ErrCorrupt, n, len(d.b)))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
