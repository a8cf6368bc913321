package export

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// Headers of the messages the JetStream and KV sinks publish. The body
// is the entry's value (empty for a tombstone). A compacted message's
// subject names its queue and key, so it carries HeaderSeq and HeaderOp
// only, and HeaderKey for a hashed key (CompactMessage).
const (
	// HeaderQueue names the queue the entry came from (the earlier,
	// uncompacted form only).
	HeaderQueue = "Trickle-Queue"
	// HeaderKey is the entry's key, with every byte outside '!'…'~' and
	// every '%' written as %XX (a URL key reads as itself).
	HeaderKey = "Trickle-Key"
	// HeaderSeq is the entry's sequence number, in decimal.
	HeaderSeq = "Trickle-Seq"
	// HeaderOp is "put" for a value, "delete" for a tombstone.
	HeaderOp = "Trickle-Op"
)

// Message is the message of e of queue on subject with every header
// (HeaderQueue, HeaderKey, HeaderSeq, HeaderOp): the form an earlier
// release's sink published on the queue's own subject, which DecodeMessage
// reads. The compacted form carries less (see CompactMessage).
func Message(subject, queue string, e Entry) *nats.Msg {
	m := CompactMessage(subject, e)
	m.Header.Set(HeaderQueue, queue)
	m.Header.Set(HeaderKey, escapeKey(e.Key))
	return m
}

// CompactMessage is the message of e on its key's subject in the
// compacted form: HeaderSeq and HeaderOp, and HeaderKey only if the
// subject's last token is a hashed one, since the subject names the
// queue and the key (DecodeSubjectMessage); the body is the value.
func CompactMessage(subject string, e Entry) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(HeaderSeq, strconv.FormatUint(e.Seq, 10))
	if e.Delete {
		m.Header.Set(HeaderOp, "delete")
	} else {
		m.Header.Set(HeaderOp, "put")
		m.Data = e.Value
	}
	if i := strings.LastIndexByte(subject, '.'); strings.HasPrefix(subject[i+1:], hashedPrefix) {
		m.Header.Set(HeaderKey, escapeKey(e.Key))
	}
	return m
}

// MessageID is an id of e of queue: the queue, a hash of the key and the
// sequence number, the same however often e is exported. The sinks do
// not send it (their expected-last-sequence checks drop an entry sent
// twice); it names entries in logs and tools.
func MessageID(queue string, e Entry) string {
	h := sha256.Sum256(e.Key)
	return queue + ":" + hex.EncodeToString(h[:16]) + ":" + strconv.FormatUint(e.Seq, 16)
}

// DecodeSubjectMessage returns the queue and the entry of a message on
// subject, in either form: with HeaderQueue, by its headers
// (DecodeMessage); else by its subject, PREFIX.QUEUE.TOKEN, the key being
// the token decoded (or HeaderKey, for a hashed token).
func DecodeSubjectMessage(subject string, h nats.Header, data []byte) (queue string, e Entry, err error) {
	if h.Get(HeaderQueue) != "" {
		return DecodeMessage(h, data)
	}
	j := strings.LastIndexByte(subject, '.')
	i := strings.LastIndexByte(subject[:max(j, 0)], '.')
	if j < 0 || i < 0 || i+1 == j {
		return "", Entry{}, fmt.Errorf("%w: subject %s names no queue and key", ErrCorrupt, subject)
	}
	key, hashed, err := DecodeKeyToken(subject[j+1:])
	if err != nil {
		return "", Entry{}, fmt.Errorf("%w: subject %s: %w", ErrCorrupt, subject, err)
	}
	if hashed {
		if key, err = unescapeKey(h.Get(HeaderKey)); err != nil || len(key) == 0 {
			return "", Entry{}, fmt.Errorf("%w: hashed subject %s, %s header %q", ErrCorrupt, subject, HeaderKey, h.Get(HeaderKey))
		}
	}
	e, err = decodeBody(key, h, data)
	return subject[i+1 : j], e, err
}

// DecodeMessage returns the queue and the entry a JetStreamSink message
// carries (its headers and body). A message without the headers, or with
// malformed ones, is an error wrapping ErrCorrupt that names the header.
func DecodeMessage(h nats.Header, data []byte) (queue string, e Entry, err error) {
	queue = h.Get(HeaderQueue)
	if queue == "" {
		return "", Entry{}, fmt.Errorf("%w: message without %s header", ErrCorrupt, HeaderQueue)
	}
	key, err := unescapeKey(h.Get(HeaderKey))
	if err != nil || len(key) == 0 {
		return "", Entry{}, fmt.Errorf("%w: %s header %q", ErrCorrupt, HeaderKey, h.Get(HeaderKey))
	}
	e, err = decodeBody(key, h, data)
	return queue, e, err
}

// decodeBody reads the entry of key from a message's HeaderSeq, HeaderOp
// and body.
func decodeBody(key []byte, h nats.Header, data []byte) (Entry, error) {
	seq, err := strconv.ParseUint(h.Get(HeaderSeq), 10, 64)
	if err != nil || seq == 0 {
		return Entry{}, fmt.Errorf("%w: %s header %q", ErrCorrupt, HeaderSeq, h.Get(HeaderSeq))
	}
	e := Entry{Key: key, Seq: seq}
	switch op := h.Get(HeaderOp); op {
	case "put":
		e.Value = append([]byte{}, data...)
	case "delete":
		e.Delete = true
	default:
		return Entry{}, fmt.Errorf("%w: %s header %q: want put or delete", ErrCorrupt, HeaderOp, op)
	}
	return e, nil
}

const hexDigits = "0123456789ABCDEF"

// escapeKey writes key with every byte outside '!'…'~', and '%', as %XX.
func escapeKey(key []byte) string {
	var b strings.Builder
	b.Grow(len(key))
	for _, c := range key {
		if c < '!' || c > '~' || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// unescapeKey is the inverse of escapeKey.
func unescapeKey(s string) ([]byte, error) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			out = append(out, s[i])
			continue
		}
		if i+2 >= len(s) {
			return nil, errors.New("truncated escape")
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return nil, err
		}
		out = append(out, byte(v))
		i += 2
	}
	return out, nil
}
