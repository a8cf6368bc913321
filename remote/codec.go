package remote

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/trickle-dev/trickle/internal/codec"
)

// wireVersion is the first byte of every request and response body sent
// whole (partVersion starts the frames of messages sent in parts). A peer
// that receives another version answers (or fails) with ErrProtocol rather
// than misreading fields, so that mixed deployments fail loudly.
const wireVersion = 1

// ErrProtocol is wrapped by errors about undecodable messages: garbage, a
// truncated body, or a peer speaking another wire version.
var ErrProtocol = errors.New("remote: protocol error")

// encoder appends the wire encoding of values to b. Encoding never fails;
// sizes are checked against the NATS max payload by the caller.
type encoder struct{ b []byte }

func (e *encoder) u8(v byte)        { e.b = append(e.b, v) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }

// u64 writes fixed 8 bytes: timestamps use the high bits, where a varint
// would take 9 bytes.
func (e *encoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }

func (e *encoder) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// bytes writes a length-prefixed byte string.
func (e *encoder) bytes(p []byte) {
	e.uvarint(uint64(len(p)))
	e.b = append(e.b, p...)
}

// str writes a length-prefixed string.
func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}

// optBytes writes p keeping nil apart from empty (length+1, 0 for nil):
// for ValuePrefix, IfValuePrefix, Start and End the difference matters.
func (e *encoder) optBytes(p []byte) {
	if p == nil {
		e.uvarint(0)
		return
	}
	e.uvarint(uint64(len(p)) + 1)
	e.b = append(e.b, p...)
}

// header starts a request: the wire version and the time the sender will
// wait for an answer, so the handler can give up when nobody listens any
// more. Zero means no limit.
func (e *encoder) header(timeout time.Duration) {
	e.u8(wireVersion)
	e.uvarint(uint64(max(timeout, 0) / time.Microsecond))
}

// setHeader replaces the header of the message in e with one carrying
// timeout, keeping the body after it.
func (e *encoder) setHeader(timeout time.Duration) {
	_, n := binary.Uvarint(e.b[1:])
	old := 1 + n
	var h encoder
	h.b = make([]byte, 0, 1+binary.MaxVarintLen64)
	h.header(timeout)
	if len(h.b) == old {
		copy(e.b, h.b)
		return
	}
	e.b = append(h.b, e.b[old:]...)
}

// decoder reads what encoder wrote, on the project's one binary reader
// (codec.Reader). It never panics: the first problem is recorded, and every
// later read returns zero values. Byte strings alias the input,
// capacity-limited so that appending to one never overwrites its
// neighbour.
type decoder struct{ codec.Reader }

// newDecoder returns a decoder of b.
func newDecoder(b []byte) decoder { return decoder{codec.NewReader(b)} }

func (d *decoder) fail(format string, args ...any) {
	d.Fail(fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...)))
}

// err returns the first problem, as an ErrProtocol: a truncated message is
// one.
func (d *decoder) err() error {
	err := d.Err()
	if err != nil && !errors.Is(err, ErrProtocol) {
		err = fmt.Errorf("%w: %w", ErrProtocol, err)
	}
	return err
}

func (d *decoder) u8() byte             { return d.Byte() }
func (d *decoder) uvarint() uint64      { return d.Uvarint() }
func (d *decoder) varint() int64        { return d.Varint() }
func (d *decoder) u64() uint64          { return d.U64() }
func (d *decoder) take(n uint64) []byte { return d.Take(n) }
func (d *decoder) bytes() []byte        { return d.Bytes() }
func (d *decoder) str() string          { return d.String() }

func (d *decoder) bool() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail("bad bool")
	return false
}

// int reads a signed int; it fails if the value does not fit this
// platform's int.
func (d *decoder) int() int {
	v := d.varint()
	if v < math.MinInt || v > math.MaxInt {
		d.fail("integer %d out of range", v)
		return 0
	}
	return int(v)
}

func (d *decoder) optBytes() []byte {
	n := d.uvarint()
	if d.Err() != nil || n == 0 {
		return nil
	}
	return d.take(n - 1)
}

// count reads a list length. Every element takes at least minSize bytes,
// so a count larger than the rest of the message is garbage; checking it
// keeps a forged count from making the decoder allocate gigabytes.
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if d.Err() != nil {
		return 0
	}
	if n > uint64(d.Len()/minSize) {
		d.fail("count %d exceeds message", n)
		return 0
	}
	return int(n)
}

// header reads what encoder.header wrote.
func (d *decoder) header() time.Duration {
	if v := d.u8(); v != wireVersion && d.Err() == nil {
		d.fail("wire version %d, want %d (or %d for a message in parts)", v, wireVersion, partVersion)
		return 0
	}
	us := d.uvarint()
	if us > uint64(math.MaxInt64/int64(time.Microsecond)) {
		d.fail("timeout out of range")
		return 0
	}
	return time.Duration(us) * time.Microsecond
}

// version reads the version byte that starts a response.
func (d *decoder) version() {
	if v := d.u8(); v != wireVersion && d.Err() == nil {
		d.fail("wire version %d, want %d", v, wireVersion)
	}
}

// finish returns the decoding error, if any, or an error if bytes are
// left over (a sign that the peer encoded something else).
func (d *decoder) finish() error {
	if d.Err() == nil && d.Len() > 0 {
		d.fail("%d trailing bytes", d.Len())
	}
	return d.err()
}
