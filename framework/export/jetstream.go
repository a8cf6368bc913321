package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers of the messages a JetStreamSink publishes. The body is the
// entry's value (empty for a tombstone).
const (
	// HeaderQueue names the queue the entry came from.
	HeaderQueue = "Trickle-Queue"
	// HeaderKey is the entry's key, with every byte outside '!'…'~' and
	// every '%' written as %XX (a URL key reads as itself).
	HeaderKey = "Trickle-Key"
	// HeaderSeq is the entry's sequence number, in decimal.
	HeaderSeq = "Trickle-Seq"
	// HeaderOp is "put" for a value, "delete" for a tombstone.
	HeaderOp = "Trickle-Op"
)

// JetStreamOptions configure a JetStreamSink. EnsureDefaults fills unset
// fields.
type JetStreamOptions struct {
	// Stream is the stream the entries go to. If it does not exist, the
	// sink creates it (file storage, the subjects below, Duplicates); if
	// it exists, it must capture them. Default: "TRICKLE_EXPORT".
	Stream string
	// Subject is the prefix of the subjects: queue Q publishes on
	// Subject.Q. Default: "trickle.export".
	Subject string
	// Duplicates is the duplicate window of a stream the sink creates:
	// a message whose id the stream took within it is dropped, so an
	// entry exported again (after a failure or a crash) within it is
	// stored once. Entries re-delivered later are stored twice, which
	// the consumers' last-sequence-wins absorbs. Default: 10m.
	Duplicates time.Duration
	// Timeout bounds one batch: every message published and acknowledged
	// by the stream within it, or the batch fails (and is exported again
	// after a backoff). Default: 30s.
	Timeout time.Duration
	// Window is how many messages may await their acknowledgement at
	// once. Default: 512.
	Window int
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *JetStreamOptions) EnsureDefaults() *JetStreamOptions {
	if o.Stream == "" {
		o.Stream = "TRICKLE_EXPORT"
	}
	if o.Subject == "" {
		o.Subject = "trickle.export"
	}
	if o.Duplicates == 0 {
		o.Duplicates = 10 * time.Minute
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Window == 0 {
		o.Window = 512
	}
	return o
}

// Validate reports the first unusable field, wrapping ErrInvalidOptions.
func (o *JetStreamOptions) Validate() error {
	switch {
	case strings.ContainsAny(o.Stream, " \t\r\n.*>/\\"):
		return fmt.Errorf("%w: Stream %q: no spaces, dots, wildcards or slashes", ErrInvalidOptions, o.Stream)
	case strings.ContainsAny(o.Subject, " \t\r\n*>") || strings.HasPrefix(o.Subject, ".") || strings.HasSuffix(o.Subject, ".") || strings.Contains(o.Subject, ".."):
		return fmt.Errorf("%w: Subject %q: want dot-separated tokens without wildcards", ErrInvalidOptions, o.Subject)
	case o.Duplicates < 0:
		return fmt.Errorf("%w: Duplicates %v must not be negative", ErrInvalidOptions, o.Duplicates)
	case o.Timeout < 0:
		return fmt.Errorf("%w: Timeout %v must not be negative", ErrInvalidOptions, o.Timeout)
	case o.Window < 1:
		return fmt.Errorf("%w: Window %d must be positive", ErrInvalidOptions, o.Window)
	}
	return nil
}

// JetStreamSink publishes entries to a NATS JetStream stream, one message
// per entry on the subject of its queue, with the entry's key, sequence
// number and operation in headers (HeaderKey, HeaderSeq, HeaderOp) and its
// value as the body. The message id (Nats-Msg-Id) is made of the queue, the
// key and the sequence number, so the stream drops an entry exported again
// within its duplicate window. A consumer reads the stream in order and
// keeps, per key, the entry with the highest sequence number
// (DecodeMessage, Table).
type JetStreamSink struct {
	js   jetstream.JetStream
	opts JetStreamOptions
	// duplicates counts messages the stream reported as duplicates.
	duplicates atomic.Uint64
}

// NewJetStreamSink returns a sink publishing over nc, and creates its
// stream if it does not exist. It fails if the stream exists but does not
// capture the sink's subjects, or if JetStream does not answer within
// ctx's deadline (or Timeout), naming the stream.
func NewJetStreamSink(ctx context.Context, nc *nats.Conn, opts JetStreamOptions) (*JetStreamSink, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("export: JetStream: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	subjects := opts.Subject + ".>"
	st, err := js.Stream(ctx, opts.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name: opts.Stream, Subjects: []string{subjects}, Storage: jetstream.FileStorage, Duplicates: opts.Duplicates,
			Description: "entries of trickle export queues (framework/export)",
		})
		if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return nil, fmt.Errorf("export: creating stream %s for %s on %s: %w", opts.Stream, subjects, nc.ConnectedUrlRedacted(), err)
		}
	case err != nil:
		return nil, fmt.Errorf("export: looking up stream %s on %s: %w", opts.Stream, nc.ConnectedUrlRedacted(), err)
	default:
		info, err := st.Info(ctx)
		if err != nil {
			return nil, fmt.Errorf("export: stream %s: %w", opts.Stream, err)
		}
		if !captures(info.Config.Subjects, opts.Subject) {
			return nil, fmt.Errorf("%w: stream %s captures %q, not %s", ErrInvalidOptions, opts.Stream, info.Config.Subjects, subjects)
		}
	}
	return &JetStreamSink{js: js, opts: opts}, nil
}

// captures reports whether a stream with these subjects stores every
// subject under prefix.
func captures(subjects []string, prefix string) bool {
	for _, s := range subjects {
		if s == ">" || s == prefix+".>" {
			return true
		}
		if p, ok := strings.CutSuffix(s, ".>"); ok && strings.HasPrefix(prefix+".", p+".") {
			return true
		}
	}
	return false
}

// Subject returns the subject queue publishes on.
func (s *JetStreamSink) Subject(queue string) string { return s.opts.Subject + "." + queue }

// Stream returns the stream's name.
func (s *JetStreamSink) Stream() string { return s.opts.Stream }

// Duplicates returns how many messages the stream dropped as duplicates
// so far: entries exported again within its duplicate window.
func (s *JetStreamSink) Duplicates() uint64 { return s.duplicates.Load() }

// Export publishes entries and returns once the stream acknowledged every
// one, or fails within Timeout naming the stream and the entry.
func (s *JetStreamSink) Export(ctx context.Context, queue string, entries []Entry) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	subject := s.Subject(queue)
	pending := make([]jetstream.PubAckFuture, 0, min(len(entries), s.opts.Window))
	at := make([]int, 0, cap(pending)) // the entry of each pending future
	wait := func() error {
		f, i := pending[0], at[0]
		pending, at = pending[1:], at[1:]
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				s.duplicates.Add(1)
			}
			return nil
		case err := <-f.Err():
			return fmt.Errorf("stream %s, subject %s, entry %s: %w", s.opts.Stream, subject, entries[i], err)
		case <-ctx.Done():
			return fmt.Errorf("stream %s, subject %s: no acknowledgement of entry %s within %v: %w", s.opts.Stream, subject, entries[i], s.opts.Timeout, context.Cause(ctx))
		}
	}
	for i, e := range entries {
		if len(pending) == s.opts.Window {
			if err := wait(); err != nil {
				return err
			}
		}
		m := Message(subject, queue, e)
		f, err := s.js.PublishMsgAsync(m, jetstream.WithMsgID(MessageID(queue, e)), jetstream.WithExpectStream(s.opts.Stream))
		if err != nil {
			return fmt.Errorf("stream %s, subject %s, entry %s: %w", s.opts.Stream, subject, e, err)
		}
		pending, at = append(pending, f), append(at, i)
	}
	for len(pending) > 0 {
		if err := wait(); err != nil {
			return err
		}
	}
	return nil
}

// Message is the message a JetStreamSink publishes for e of queue on
// subject (without its id, which MessageID gives).
func Message(subject, queue string, e Entry) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(HeaderQueue, queue)
	m.Header.Set(HeaderKey, escapeKey(e.Key))
	m.Header.Set(HeaderSeq, strconv.FormatUint(e.Seq, 10))
	if e.Delete {
		m.Header.Set(HeaderOp, "delete")
	} else {
		m.Header.Set(HeaderOp, "put")
		m.Data = e.Value
	}
	return m
}

// MessageID is the message id of e of queue: the queue, a hash of the key
// and the sequence number, the same however often e is exported.
func MessageID(queue string, e Entry) string {
	h := sha256.Sum256(e.Key)
	return queue + ":" + hex.EncodeToString(h[:16]) + ":" + strconv.FormatUint(e.Seq, 16)
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
	seq, err := strconv.ParseUint(h.Get(HeaderSeq), 10, 64)
	if err != nil || seq == 0 {
		return "", Entry{}, fmt.Errorf("%w: %s header %q", ErrCorrupt, HeaderSeq, h.Get(HeaderSeq))
	}
	e = Entry{Key: key, Seq: seq}
	switch op := h.Get(HeaderOp); op {
	case "put":
		e.Value = append([]byte{}, data...)
	case "delete":
		e.Delete = true
	default:
		return "", Entry{}, fmt.Errorf("%w: %s header %q: want put or delete", ErrCorrupt, HeaderOp, op)
	}
	return queue, e, nil
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
