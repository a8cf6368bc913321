package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// RowLockOptions configure NewRowLocks. The zero value is usable:
// EnsureDefaults fills in every field left unset.
type RowLockOptions struct {
	// Bucket is the JetStream KV bucket holding the locks; every worker of
	// a cluster must use the same one. Default: "trickle_rowlocks".
	Bucket string
	// TTL is how long a lock lasts unless released: a crashed holder's lock
	// frees itself after TTL (plus up to a second of server expiry lag).
	// Choose it above the longest time a row is worked on: a lock that
	// expires mid-work lets another scanner in (wasted work, never an
	// incorrect result). A whole number of seconds, at least 1s.
	// Default: 30s.
	TTL time.Duration
	// Replicas is the bucket's replica count when this process creates it
	// (1 to 5). Default: 1.
	Replicas int
	// ReleaseTimeout bounds the delete a release function sends. Default: 5s.
	ReleaseTimeout time.Duration
	// Logger receives failed releases. Default: slog.Default().
	Logger *slog.Logger
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *RowLockOptions) EnsureDefaults() *RowLockOptions {
	if o.Bucket == "" {
		o.Bucket = "trickle_rowlocks"
	}
	if o.TTL == 0 {
		o.TTL = 30 * time.Second
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.ReleaseTimeout == 0 {
		o.ReleaseTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports the first unusable field.
func (o *RowLockOptions) Validate() error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidOptions, field, why) }
	if err := validTTL(o.TTL); err != nil {
		return bad("TTL", err.Error())
	}
	switch {
	case !bucketNameRe.MatchString(o.Bucket):
		return bad("Bucket", "must be letters, digits, '-' and '_'")
	case o.Replicas < 1 || o.Replicas > 5:
		return bad("Replicas", "must be within 1..5")
	case o.ReleaseTimeout <= 0:
		return bad("ReleaseTimeout", "must be positive")
	case o.Logger == nil:
		return bad("Logger", "must be set (call EnsureDefaults)")
	}
	return nil
}

// RowLockStats count row-lock activity since NewRowLocks, for metrics: a high
// Contended/Attempts ratio means scanners keep colliding on the same rows.
type RowLockStats struct {
	Attempts  uint64 // TryLock calls
	Acquired  uint64 // TryLock calls that took the lock
	Contended uint64 // TryLock calls that found the row locked
	Errors    uint64 // TryLock calls that failed
	Released  uint64 // releases that deleted their lock
	Lost      uint64 // releases that found their lock expired or taken over
}

// RowLocks are advisory, self-expiring locks on rows, shared by every worker
// through a JetStream KV bucket. Scanners take one before running an
// observer on a row so that two workers rarely do the same work; they guard
// nothing that matters for correctness (transactions do), which is why they
// live in memory and may be lost or expire early without harm.
type RowLocks struct {
	js    jetstream.JetStream
	spec  bucketSpec
	kv    jetstream.KeyValue
	owner string
	opts  RowLockOptions
	log   *slog.Logger

	attempts, acquired, contended, failed, released, lost atomic.Uint64
}

// NewRowLocks returns the row locks of owner (typically the worker ID, shown
// by Holder), creating the bucket if needed.
func NewRowLocks(ctx context.Context, js jetstream.JetStream, owner string, opts RowLockOptions) (*RowLocks, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if owner == "" {
		return nil, fmt.Errorf("%w: owner must not be empty", ErrInvalidOptions)
	}
	spec := bucketSpec{
		name:        opts.Bucket,
		description: "trickle advisory row locks",
		replicas:    opts.Replicas,
	}
	kv, err := ensureBucket(ctx, js, spec)
	if err != nil {
		return nil, err
	}
	return &RowLocks{js: js, spec: spec, kv: kv, owner: owner, opts: opts, log: opts.Logger.With("owner", owner)}, nil
}

// rowKey maps (table, row) to a KV key: arbitrary bytes cannot be keys, so
// the key is the SHA-256 of the length-prefixed table and row, hex-encoded
// and cut to 32 characters (128 bits: collisions, which would only make two
// rows share a lock, are out of reach).
func rowKey(table string, row []byte) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(table)))])
	h.Write([]byte(table))
	h.Write(row)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// TryLock takes the lock on (table, row) if no one holds it. ok is false
// without error if someone does; err is for failures to reach the bucket.
// On success, call release when done with the row: it deletes the lock only
// if it is still ours (not expired and taken by someone else meanwhile), and
// may be called more than once.
func (l *RowLocks) TryLock(ctx context.Context, table string, row []byte) (release func(), ok bool, err error) {
	l.attempts.Add(1)
	key := rowKey(table, row)
	rev, err := l.kv.Create(ctx, key, []byte(l.owner), jetstream.KeyTTL(l.opts.TTL))
	if bucketLost(err) {
		// The server restarted and lost the bucket, and every lock with it:
		// create it again and try once more.
		if _, rerr := ensureBucket(ctx, l.js, l.spec); rerr != nil {
			l.failed.Add(1)
			return nil, false, fmt.Errorf("cluster: lock row of %q: recreating the lost bucket: %w", table, rerr)
		}
		l.log.Warn("row lock bucket was lost (NATS server restarted); recreated it")
		rev, err = l.kv.Create(ctx, key, []byte(l.owner), jetstream.KeyTTL(l.opts.TTL))
	}
	switch {
	case err == nil:
		l.acquired.Add(1)
		var once sync.Once
		return func() { once.Do(func() { l.release(key, rev) }) }, true, nil
	case isWrongLastSeq(err):
		// Held; or, rarely, an expiry marker vanished between Create's read
		// and write, which looks the same and costs one skipped row.
		l.contended.Add(1)
		return nil, false, nil
	default:
		l.failed.Add(1)
		return nil, false, fmt.Errorf("cluster: lock row of %q: %w", table, err)
	}
}

// release deletes key if its latest revision is still rev, i.e. our lock.
func (l *RowLocks) release(key string, rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.ReleaseTimeout)
	defer cancel()
	// A purge leaves a marker that expires on its own, unlike a delete's.
	err := l.kv.Purge(ctx, key, jetstream.LastRevision(rev), jetstream.PurgeTTL(markerTTL))
	switch {
	case err == nil:
		l.released.Add(1)
	case isWrongLastSeq(err):
		l.lost.Add(1)
		l.log.Debug("row lock expired before release", "key", key)
	default:
		// Left to expire.
		l.log.Warn("row lock release failed; it will expire", "key", key, "ttl", l.opts.TTL, "err", err)
	}
}

// Holder returns the owner of the lock on (table, row), if any, for
// debugging.
func (l *RowLocks) Holder(ctx context.Context, table string, row []byte) (owner string, ok bool, err error) {
	e, err := l.kv.Get(ctx, rowKey(table, row))
	switch {
	case err == nil:
		return string(e.Value()), true, nil
	case notFound(err):
		return "", false, nil
	default:
		return "", false, fmt.Errorf("cluster: row lock holder in %q: %w", table, err)
	}
}

// Stats returns the counters since NewRowLocks.
func (l *RowLocks) Stats() RowLockStats {
	return RowLockStats{
		Attempts:  l.attempts.Load(),
		Acquired:  l.acquired.Load(),
		Contended: l.contended.Load(),
		Errors:    l.failed.Load(),
		Released:  l.released.Load(),
		Lost:      l.lost.Load(),
	}
}
