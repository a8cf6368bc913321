package export

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// KVOptions configure a KVSink. EnsureDefaults fills unset fields.
type KVOptions struct {
	// Bucket is the KV bucket the table goes to, created if missing
	// (history 1, file storage). Letters, digits, '-' and '_'. Default:
	// "trickle-export".
	Bucket string
	// TombstoneAge is how long the bucket keeps a deleted key's delete
	// marker before removing it (its Nats-TTL); negative keeps them.
	// Default: 24h; at least 1s. See JetStreamOptions.TombstoneAge.
	TombstoneAge time.Duration
	// MaxToken bounds a key's KV key: longer keys are hashed (KeyToken).
	// Default: DefaultMaxToken; at least 66.
	MaxToken int
	// CacheKeys, Timeout and Window are as in JetStreamOptions. Defaults:
	// 1<<18, 30s, 512.
	CacheKeys int
	Timeout   time.Duration
	Window    int
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *KVOptions) EnsureDefaults() *KVOptions {
	if o.Bucket == "" {
		o.Bucket = "trickle-export"
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
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Window == 0 {
		o.Window = 512
	}
	return o
}

var validBucket = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Validate reports the first unusable field, wrapping ErrInvalidOptions.
func (o *KVOptions) Validate() error {
	switch {
	case !validBucket.MatchString(o.Bucket):
		return fmt.Errorf("%w: Bucket %q: want letters, digits, '-' and '_'", ErrInvalidOptions, o.Bucket)
	}
	return validateCompaction(o.TombstoneAge, "delete markers", o.MaxToken, o.CacheKeys, o.Timeout, o.Window)
}

// KVSink exports one queue's table into a NATS KV bucket, so that `nats
// kv get`, `nats kv watch` and any KV client read it with nothing of this
// package: the value of key K is the bucket's key KeyToken(K), a deleted
// key is a KV delete (its marker removed after TombstoneAge). Each
// message also carries HeaderSeq and HeaderOp, and for a hashed KV key
// HeaderKey, the full key (CompactMessage).
//
// It keeps the ordering guarantee of JetStreamSink, with the same
// mechanism: a put expects the key's last revision to be the one the
// sink knows of, and a refused put reads the key's last message and
// writes only if its entry is newer (by HeaderSeq; a value written by
// another client, without it, is always older). So a key's revision only
// ever moves to a higher sequence number; a reader sees an older value
// only for a key whose newer entry is not exported yet.
//
// A bucket holds the keys of one queue: a sink asked to export a second
// queue fails, since their keys would overwrite each other.
type KVSink struct {
	kv   jetstream.KeyValue
	opts KVOptions
	c    *compactor
	mu   sync.Mutex
	// queue is the queue the bucket holds, once one exported.
	queue string
}

// NewKVSink returns a sink writing over nc into the bucket, creating it
// if missing and allowing per-message TTLs on its stream. It fails if the
// server is older than NATS 2.11, or does not answer within ctx's
// deadline (or Timeout), naming the bucket and the server.
func NewKVSink(ctx context.Context, nc *nats.Conn, opts KVOptions) (*KVSink, error) {
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
	setup, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	kv, err := js.CreateKeyValue(setup, jetstream.KeyValueConfig{Bucket: opts.Bucket, History: 1, Storage: jetstream.FileStorage,
		Description: "the table of a trickle export queue (framework/export)"})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(setup, opts.Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("export: KV bucket %s on %s: %w", opts.Bucket, nc.ConnectedUrlRedacted(), err)
	}
	name := "KV_" + opts.Bucket
	st, err := js.Stream(setup, name)
	if err != nil {
		return nil, fmt.Errorf("export: stream %s of KV bucket %s on %s: %w", name, opts.Bucket, nc.ConnectedUrlRedacted(), err)
	}
	if cfg := st.CachedInfo().Config; !cfg.AllowMsgTTL && opts.TombstoneAge > 0 {
		cfg.AllowMsgTTL = true
		if _, err := js.UpdateStream(setup, cfg); err != nil {
			return nil, fmt.Errorf("export: allowing per-message TTLs on stream %s of KV bucket %s on %s: %w", name, opts.Bucket, nc.ConnectedUrlRedacted(), err)
		}
	}
	s := &KVSink{kv: kv, opts: opts}
	s.c = &compactor{js: js, stream: st, name: name, timeout: opts.Timeout, window: opts.Window,
		tombstoneAge: max(opts.TombstoneAge, 0), subject: func(_ string, key []byte) string { return "$KV." + opts.Bucket + "." + s.Key(key) },
		message: kvMessage, last: map[string]lastMsg{}, cacheMax: opts.CacheKeys}
	return s, nil
}

// kvMessage is the message of e in a bucket: the value as the body, a
// tombstone a KV delete.
func kvMessage(subject, _ string, e Entry) *nats.Msg {
	m := CompactMessage(subject, e)
	if e.Delete {
		m.Header.Set("KV-Operation", "DEL")
	}
	return m
}

// Key returns the bucket's key for key.
func (s *KVSink) Key(key []byte) string {
	t, _ := KeyToken(key, s.opts.MaxToken)
	return t
}

// KV returns the bucket, to read.
func (s *KVSink) KV() jetstream.KeyValue { return s.kv }

// Stale returns how many entries the sink dropped so far because their
// key held a newer one.
func (s *KVSink) Stale() uint64 { return s.c.stale.Load() }

// Export writes the latest entry of each key of entries into the bucket,
// and returns once each is stored or its key holds a newer one, or fails
// within Timeout naming the bucket's stream and the entry.
func (s *KVSink) Export(ctx context.Context, queue string, entries []Entry) error {
	s.mu.Lock()
	if s.queue == "" {
		s.queue = queue
	}
	holds := s.queue
	s.mu.Unlock()
	if holds != queue {
		return fmt.Errorf("%w: KV bucket %s holds queue %s; queue %s needs a bucket of its own", ErrInvalidOptions, s.opts.Bucket, holds, queue)
	}
	return s.c.export(ctx, queue, entries)
}
