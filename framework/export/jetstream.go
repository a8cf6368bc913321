package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStreamOptions configure a JetStreamSink. EnsureDefaults fills unset
// fields.
type JetStreamOptions struct {
	// Stream is the stream the entries go to. If it does not exist, the
	// sink creates it (file storage, the subjects below,
	// MaxMsgsPerSubject, per-message TTLs allowed); if it exists, it must
	// capture them, and the sink sets its MaxMsgsPerSubject and allows
	// per-message TTLs, first moving what an older sink published there
	// into the compacted form (see JetStreamSink). Default:
	// "TRICKLE_EXPORT".
	Stream string
	// Subject is the prefix of the subjects: queue Q publishes key K on
	// Subject.Q.T, T being KeyToken(K). Default: "trickle.export".
	Subject string
	// MaxMsgsPerSubject is how many messages the stream keeps per key:
	// 1, the default, keeps a key's latest entry only, so the stream
	// holds one message per key (and per tombstone younger than
	// TombstoneAge); more keep that much history. At least 1.
	MaxMsgsPerSubject int64
	// TombstoneAge is how long the stream keeps a tombstone (the message
	// of a deleted key, HeaderOp "delete") before removing it, through
	// the message's TTL (Nats-TTL, NATS 2.11 and later): a consumer
	// away for longer than this misses deletions and must read the
	// stream again from its start (see JetStreamSink). Negative keeps
	// tombstones for ever. Default: 24h; at least 1s. (The stream's
	// SubjectDeleteMarkerTTL is not used: it places markers of its own
	// when MaxAge removes a subject's last message.)
	TombstoneAge time.Duration
	// MaxToken bounds a key's subject token: a key whose token would be
	// longer is named by its hash (see KeyToken). Default:
	// DefaultMaxToken; at least 66.
	MaxToken int
	// CacheKeys bounds how many keys' last stream sequence the sink
	// remembers (about 100 bytes each), so that publishing a key it has
	// seen costs no lookup. Default: 1<<18.
	CacheKeys int
	// Timeout bounds one batch: every message published and acknowledged
	// by the stream within it, or the batch fails (and is exported again
	// after a backoff). Default: 30s.
	Timeout time.Duration
	// Window is how many messages may await their acknowledgement at
	// once. Default: 512.
	Window int
	// Logger receives what the sink did beyond publishing (a migration).
	// Default: slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *JetStreamOptions) EnsureDefaults() *JetStreamOptions {
	if o.Stream == "" {
		o.Stream = "TRICKLE_EXPORT"
	}
	if o.Subject == "" {
		o.Subject = "trickle.export"
	}
	if o.MaxMsgsPerSubject == 0 {
		o.MaxMsgsPerSubject = 1
	}
	if o.TombstoneAge == 0 {
		o.TombstoneAge = 24 * time.Hour
	}
	if o.MaxToken == 0 {
		o.MaxToken = DefaultMaxToken
	}
	if o.CacheKeys == 0 {
		o.CacheKeys = 1 << 18
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
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
	case o.MaxMsgsPerSubject < 1:
		return fmt.Errorf("%w: MaxMsgsPerSubject %d must be positive", ErrInvalidOptions, o.MaxMsgsPerSubject)
	}
	return validateCompaction(o.TombstoneAge, "tombstones", o.MaxToken, o.CacheKeys, o.Timeout, o.Window)
}

// validateCompaction reports the first unusable setting among those both
// compacting sinks (JetStreamSink, KVSink) share; kept names what a
// negative TombstoneAge keeps.
func validateCompaction(tombstoneAge time.Duration, kept string, maxToken, cacheKeys int, timeout time.Duration, window int) error {
	switch {
	case tombstoneAge > 0 && tombstoneAge < time.Second:
		return fmt.Errorf("%w: TombstoneAge %v: at least 1s (or negative, to keep %s)", ErrInvalidOptions, tombstoneAge, kept)
	case maxToken < minMaxToken:
		return fmt.Errorf("%w: MaxToken %d: at least %d", ErrInvalidOptions, maxToken, minMaxToken)
	case cacheKeys < 1:
		return fmt.Errorf("%w: CacheKeys %d must be positive", ErrInvalidOptions, cacheKeys)
	case timeout < 0:
		return fmt.Errorf("%w: Timeout %v must not be negative", ErrInvalidOptions, timeout)
	case window < 1:
		return fmt.Errorf("%w: Window %d must be positive", ErrInvalidOptions, window)
	}
	return nil
}

// JetStreamSink publishes entries to a NATS JetStream stream as a
// compacted changelog: each key on a subject of its own (Subject.Q.T, T
// the key's KeyToken), which the stream keeps MaxMsgsPerSubject messages
// of, so the stream holds one message per key however often keys change,
// and a consumer reads the table by reading the last message of each
// subject (Consume). A message's subject names the queue and the key, its
// headers the entry's sequence number and operation (HeaderSeq, HeaderOp,
// and HeaderKey for a hashed key: CompactMessage), its body the value; a
// deleted key's message is a tombstone (HeaderOp "delete", no body) that
// the stream removes once it is TombstoneAge old.
//
// The guarantee: on each subject, the sequence number of the last
// message never goes down. Every publish expects the subject's last
// message to be the one the sink knows of (Nats-Expected-Last-Subject-
// Sequence; none for a key it does not know); when the stream refuses it
// (a re-sent batch, a second process draining the same bucket, a
// pipelined publish that failed and was sent again after a newer one),
// the sink reads the subject's last message and publishes again only if
// its entry is newer. So a consumer that starts at any moment and reads
// the last message of every subject holds, per key, an entry at least as
// new as every entry whose batch had been acknowledged when it read that
// subject; it sees an older value only for a key whose newer entry is
// still in the queue (not exported yet). A key whose tombstone the stream
// removed has no subject any more: a consumer that keeps a table and
// comes back after more than TombstoneAge may have missed a deletion, the
// key staying in its table, and must rebuild its table by reading the
// stream again; one that resumes within TombstoneAge after the stream
// sequence it stopped at (a durable consumer of its own) sees every key's
// latest change since, deletions included. Within
// one batch, a key's entries collapse into the last, so with
// MaxMsgsPerSubject above 1 the history kept is one message per batch.
// An entry re-delivered after its key's tombstone expired, by a sink
// that has not seen the key (a restarted process), would bring the key
// back: TombstoneAge must exceed how long an exported entry can stay in
// the queue, which is minutes unless the store is down.
//
// A stream written by the sink of earlier releases (every entry on
// Subject.Q, keyed by its header) is moved into this form when the sink
// starts: each key's latest entry is published on its subject, then the
// old subject is purged; Consume reads an old subject it still finds.
type JetStreamSink struct {
	js   jetstream.JetStream
	opts JetStreamOptions
	c    *compactor
}

// NewJetStreamSink returns a sink publishing over nc into its stream.
//
// It creates the stream if it does not exist or makes an existing one
// compacted, moving the entries an earlier release published there (see
// JetStreamSink). It
// fails if the stream exists but does not capture the sink's subjects,
// if the server is older than NATS 2.11 (no per-message TTLs), or if
// JetStream does not answer within ctx's deadline (or Timeout), naming
// the stream and the server.
func NewJetStreamSink(ctx context.Context, nc *nats.Conn, opts JetStreamOptions) (*JetStreamSink, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if err := checkServer(nc); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("export: JetStream: %w", err)
	}
	s := &JetStreamSink{js: js, opts: opts}
	setup, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	subjects := opts.Subject + ".>"
	want := jetstream.StreamConfig{
		Name: opts.Stream, Subjects: []string{subjects}, Storage: jetstream.FileStorage,
		MaxMsgsPerSubject: opts.MaxMsgsPerSubject, AllowMsgTTL: true, AllowDirect: true,
		Description: "entries of trickle export queues, one subject per key (framework/export)",
	}
	st, err := js.Stream(setup, opts.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		st, err = js.CreateStream(setup, want)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = js.Stream(setup, opts.Stream)
		}
		if err != nil {
			return nil, fmt.Errorf("export: creating stream %s for %s on %s: %w", opts.Stream, subjects, nc.ConnectedUrlRedacted(), err)
		}
	case err != nil:
		return nil, fmt.Errorf("export: looking up stream %s on %s: %w", opts.Stream, nc.ConnectedUrlRedacted(), err)
	default:
		cfg := st.CachedInfo().Config
		if !captures(cfg.Subjects, opts.Subject) {
			return nil, fmt.Errorf("%w: stream %s captures %q, not %s", ErrInvalidOptions, opts.Stream, cfg.Subjects, subjects)
		}
	}
	s.c = &compactor{js: js, stream: st, name: opts.Stream, timeout: opts.Timeout, window: opts.Window,
		tombstoneAge: max(opts.TombstoneAge, 0), subject: s.KeySubject, message: func(subject, _ string, e Entry) *nats.Msg { return CompactMessage(subject, e) },
		last: map[string]lastMsg{}, cacheMax: opts.CacheKeys}
	// TTLs first, for the tombstones the migration publishes; the limit
	// per subject last, once nothing is left on an old subject.
	if cfg := st.CachedInfo().Config; !cfg.AllowMsgTTL || !cfg.AllowDirect {
		cfg.AllowMsgTTL, cfg.AllowDirect = true, true
		if err := s.update(setup, cfg); err != nil {
			return nil, err
		}
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	if cfg := s.c.stream.CachedInfo().Config; cfg.MaxMsgsPerSubject != opts.MaxMsgsPerSubject {
		cfg.MaxMsgsPerSubject = opts.MaxMsgsPerSubject
		if err := s.update(setup, cfg); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// update gives the stream cfg, and the compactor the updated stream.
func (s *JetStreamSink) update(ctx context.Context, cfg jetstream.StreamConfig) error {
	st, err := s.js.UpdateStream(ctx, cfg)
	if err != nil {
		return fmt.Errorf("export: making stream %s compacted: %w", s.opts.Stream, err)
	}
	s.c.stream = st
	return nil
}

// checkServer refuses a server without per-message TTLs (before 2.11),
// which would keep tombstones for ever.
func checkServer(nc *nats.Conn) error {
	v := nc.ConnectedServerVersion()
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return fmt.Errorf("export: NATS server %s reports version %q", nc.ConnectedUrlRedacted(), v)
	}
	if major < 2 || major == 2 && minor < 11 {
		return fmt.Errorf("%w: NATS server %s is version %s; the export needs 2.11 or later (per-message TTLs)", ErrInvalidOptions, nc.ConnectedUrlRedacted(), v)
	}
	return nil
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

// Subject returns the prefix of queue's subjects, Subject.queue: an
// earlier release's sink published all its entries there.
func (s *JetStreamSink) Subject(queue string) string { return s.opts.Subject + "." + queue }

// KeySubject returns the subject of key in queue.
func (s *JetStreamSink) KeySubject(queue string, key []byte) string {
	t, _ := KeyToken(key, s.opts.MaxToken)
	return s.opts.Subject + "." + queue + "." + t
}

// Stream returns the stream's name.
func (s *JetStreamSink) Stream() string { return s.opts.Stream }

// Stale returns how many entries the sink dropped so far because their
// key's subject held a newer one.
func (s *JetStreamSink) Stale() uint64 { return s.c.stale.Load() }

// Export publishes the latest entry of each key of entries and returns
// once the stream acknowledged each or holds a newer one for its key, or
// fails within Timeout naming the stream and the entry.
func (s *JetStreamSink) Export(ctx context.Context, queue string, entries []Entry) error {
	return s.c.export(ctx, queue, entries)
}
