package remote

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"time"
)

// partVersion is the first byte of every frame of the parts protocol,
// which carries a message too large for one NATS message (see doc.go). It
// differs from wireVersion so that a peer which only knows whole messages
// fails with "wire version 2, want 1" instead of misreading a part, and so
// that the first byte alone tells a whole message from a frame.
const partVersion = 2

// frameKind says what a frame is; the fields it carries depend on it.
type frameKind byte

const (
	// frameOpen (client to endpoint) starts an upload: timeout, total,
	// sum, and the first chunk.
	frameOpen frameKind = 1 + iota
	// frameAck (service to client) accepts a part: id, the next part
	// expected, the largest chunk the service takes, and the subject
	// further parts go to.
	frameAck
	// framePart (client to the part subject) continues an upload: id,
	// seq, chunk.
	framePart
	// frameDownload (service to client, as the answer to a request)
	// starts a response in parts: id, total, sum, the part subject and
	// the first chunk.
	frameDownload
	// framePull (client to the part subject) asks for the next part of a
	// response: id, seq and the largest chunk the client takes.
	framePull
	// frameChunk (service to client) answers a pull: id, seq, chunk.
	frameChunk
	// frameAbort (client to the part subject, no answer) drops an upload
	// or download the client gave up on, so its memory is freed at once.
	frameAbort
	frameKinds = frameAbort
)

var frameNames = [...]string{frameOpen: "open", frameAck: "ack", framePart: "part",
	frameDownload: "download", framePull: "pull", frameChunk: "chunk", frameAbort: "abort"}

func (k frameKind) String() string {
	if k >= 1 && k <= frameKinds {
		return frameNames[k]
	}
	return "unknown"
}

// frame is one decoded frame of the parts protocol. A transfer (an upload
// or a download) is named by id, which the service assigns; parts are
// numbered from 0 (the open or download frame), and each must carry the
// number the receiver expects next, so a lost, repeated or reordered part
// is detected at once.
type frame struct {
	kind     frameKind
	id       uint64        // transfer id (not in an open frame)
	seq      uint64        // part, pull, chunk: part number; ack: the next part expected
	timeout  time.Duration // open: how long the client waits for the whole request
	total    uint64        // open, download: size of the whole message
	sum      uint32        // open, download: CRC-32C of the whole message
	subject  string        // ack, download: the subject of further parts
	maxChunk uint64        // ack, pull: the largest chunk the frame's sender accepts
	chunk    []byte        // open, part, download, chunk: the rest of the frame
}

// castagnoli is the CRC-32C table: hardware-accelerated on amd64 and
// arm64, so checking a reassembled message costs little next to copying it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// hasChunk reports whether frames of kind k end with message bytes.
func (k frameKind) hasChunk() bool {
	return k == frameOpen || k == framePart || k == frameDownload || k == frameChunk
}

// frameHead writes everything of f but its chunk, so that a sender can
// size the chunk to what is left of the max payload and append it.
func (e *encoder) frameHead(f *frame) {
	e.u8(partVersion)
	e.u8(byte(f.kind))
	switch f.kind {
	case frameOpen:
		e.uvarint(uint64(max(f.timeout, 0) / time.Microsecond))
		e.uvarint(f.total)
		e.b = binary.BigEndian.AppendUint32(e.b, f.sum)
	case frameAck:
		e.uvarint(f.id)
		e.uvarint(f.seq)
		e.uvarint(f.maxChunk)
		e.str(f.subject)
	case framePart, frameChunk:
		e.uvarint(f.id)
		e.uvarint(f.seq)
	case frameDownload:
		e.uvarint(f.id)
		e.uvarint(f.total)
		e.b = binary.BigEndian.AppendUint32(e.b, f.sum)
		e.str(f.subject)
	case framePull:
		e.uvarint(f.id)
		e.uvarint(f.seq)
		e.uvarint(f.maxChunk)
	case frameAbort:
		e.uvarint(f.id)
	}
}

// frame writes f whole.
func (e *encoder) frame(f *frame) {
	e.frameHead(f)
	if f.kind.hasChunk() {
		e.b = append(e.b, f.chunk...)
	}
}

// frame reads a frame. It checks what a single frame can show to be
// wrong; whether a part is the one expected is the receiver's business.
// The chunk aliases the message.
func (d *decoder) frame() frame {
	var f frame
	if v := d.u8(); v != partVersion && d.Err() == nil {
		d.fail("part frame version %d, want %d", v, partVersion)
	}
	f.kind = frameKind(d.u8())
	if d.Err() != nil {
		return f
	}
	switch f.kind {
	case frameOpen:
		us := d.uvarint()
		if us > uint64(1<<63-1)/uint64(time.Microsecond) {
			d.fail("timeout out of range")
		}
		f.timeout = time.Duration(us) * time.Microsecond
		f.total = d.uvarint()
		f.sum = d.u32()
	case frameAck:
		f.id, f.seq, f.maxChunk, f.subject = d.uvarint(), d.uvarint(), d.uvarint(), d.str()
	case framePart, frameChunk:
		f.id, f.seq = d.uvarint(), d.uvarint()
	case frameDownload:
		f.id, f.total, f.sum, f.subject = d.uvarint(), d.uvarint(), d.u32(), d.str()
	case framePull:
		f.id, f.seq, f.maxChunk = d.uvarint(), d.uvarint(), d.uvarint()
	case frameAbort:
		f.id = d.uvarint()
	default:
		d.fail("unknown part frame kind %d", f.kind)
		return f
	}
	if f.kind.hasChunk() && d.Err() == nil {
		f.chunk = d.take(uint64(d.Len()))
	}
	if d.Err() != nil {
		return f
	}
	switch {
	case f.kind != frameOpen && f.id == 0:
		d.fail("%s frame without a transfer id", f.kind)
	case (f.kind == frameOpen || f.kind == frameDownload) && f.total == 0:
		d.fail("%s frame of an empty message", f.kind)
	case f.kind.hasChunk() && len(f.chunk) == 0:
		d.fail("%s frame without data", f.kind)
	case (f.kind == frameOpen || f.kind == frameDownload) && uint64(len(f.chunk)) > f.total:
		d.fail("%s frame: first part of %d bytes exceeds the message size %d", f.kind, len(f.chunk), f.total)
	case (f.kind == framePart || f.kind == frameChunk) && f.seq == 0:
		d.fail("%s frame numbered 0 (part 0 is the open frame)", f.kind)
	case (f.kind == frameAck || f.kind == framePull) && f.maxChunk == 0:
		d.fail("%s frame with a zero chunk size", f.kind)
	case (f.kind == frameAck || f.kind == frameDownload) && !validSubject(f.subject):
		d.fail("%s frame: bad part subject %q", f.kind, f.subject)
	}
	return f
}

// u32 reads a fixed 4-byte big-endian integer.
func (d *decoder) u32() uint32 {
	if d.Len() < 4 {
		d.fail("truncated message")
		return 0
	}
	v := binary.BigEndian.Uint32(d.Take(4))
	return v
}

// validSubject reports whether s is a literal NATS subject: dot-separated
// tokens without wildcards or spaces.
func validSubject(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if !validToken(tok) {
			return false
		}
	}
	return true
}
