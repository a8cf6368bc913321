// Package codec reads the compact binary encodings the project writes with
// encoding/binary's Append functions: varints, fixed 8-byte integers and
// length-prefixed byte strings. One Reader serves every format (protocol
// records, documents, wire messages), so that each checks lengths the same
// way and none can panic on garbage.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrTruncated is wrapped by the error of a Reader that ran out of input
// or met a malformed varint.
var ErrTruncated = errors.New("codec: truncated or malformed input")

// Reader reads values from B, remembering the first problem: after it,
// every read returns a zero value, so a decoder reads every field and
// checks Err once.
type Reader struct {
	B   []byte
	err error
}

// NewReader returns a Reader of b.
func NewReader(b []byte) Reader { return Reader{B: b} }

// Err returns the first problem met, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records err as the reader's problem unless it already has one, and
// stops it: later reads return zero values.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
		r.B = nil
	}
}

func (r *Reader) short(what string) { r.Fail(fmt.Errorf("%w: %s", ErrTruncated, what)) }

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if len(r.B) < 1 {
		r.short("byte")
		return 0
	}
	v := r.B[0]
	r.B = r.B[1:]
	return v
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.short("uvarint")
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.short("varint")
		return 0
	}
	r.B = r.B[n:]
	return v
}

// U64 reads a big-endian 8-byte integer.
func (r *Reader) U64() uint64 {
	if len(r.B) < 8 {
		r.short("8-byte integer")
		return 0
	}
	v := binary.BigEndian.Uint64(r.B)
	r.B = r.B[8:]
	return v
}

// Take reads n bytes. They alias the input, capacity-limited so that
// appending to them never overwrites what follows.
func (r *Reader) Take(n uint64) []byte {
	if uint64(len(r.B)) < n {
		r.short(fmt.Sprintf("%d bytes", n))
		return nil
	}
	v := r.B[:n:n]
	r.B = r.B[n:]
	return v
}

// Bytes reads a uvarint length and that many bytes (aliasing the input,
// see Take).
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if r.err != nil {
		return nil
	}
	return r.Take(n)
}

// String reads what Bytes reads, as a string.
func (r *Reader) String() string { return string(r.Bytes()) }

// Len returns how many bytes are left.
func (r *Reader) Len() int { return len(r.B) }
