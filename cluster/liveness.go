package cluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrWorkerIDInUse is returned by NewLiveness (and logged by the refresher)
// when another live process holds a token under the same worker ID. Worker
// IDs name lock holders, so two processes sharing one would vouch for each
// other's abandoned locks.
var ErrWorkerIDInUse = errors.New("cluster: worker ID in use by another live process")

// ErrClosed is returned by methods of a closed Liveness.
var ErrClosed = errors.New("cluster: closed")

// maxWorkerIDLen bounds worker IDs, which become (part of) KV keys.
const maxWorkerIDLen = 256

// LivenessOptions configure NewLiveness. The zero value is usable:
// EnsureDefaults fills in every field left unset.
type LivenessOptions struct {
	// Bucket is the JetStream KV bucket holding the tokens; every worker of
	// a cluster must use the same one. Default: "trickle_workers".
	Bucket string
	// TTL is how long a token outlives its last refresh: a crashed worker
	// is reported dead within TTL (plus up to a second of server expiry
	// lag). A whole number of seconds, at least 1s. Default: 10s.
	TTL time.Duration
	// RefreshInterval is how often the token is rewritten; it also bounds
	// each refresh. Must be shorter than TTL. Default: TTL/3.
	RefreshInterval time.Duration
	// CacheFor is how long Alive remembers an answer, to keep lock
	// resolution cheap; a negative value disables the cache. Must be
	// shorter than TTL. Default: TTL/10.
	CacheFor time.Duration
	// Info describes this worker in Workers' listing (for a status
	// command). Default: "host=<hostname> pid=<pid>".
	Info string
	// Replicas is the bucket's replica count when this worker creates it
	// (1 to 5; more survive the loss of a server in a cluster). Default: 1.
	Replicas int
	// Logger receives refresh failures and expiry warnings. Default:
	// slog.Default().
	Logger *slog.Logger
	// OldestActive returns the start timestamp of this worker's oldest
	// running transaction (0: none). It is called at every write of the
	// token, so that what the token says is as of that write: a garbage
	// collector that sees a token written after it drew a timestamp knows
	// every transaction the worker began before that timestamp (see
	// ClusterOldestActive). Default: none, the token reports 0.
	OldestActive func() uint64
	// Scans says that the worker runs scanners, which take advisory row
	// locks (RowLocks): a runner whose listing shows no other such worker
	// may keep its row locks in process. Default: false (a loader, a
	// client).
	Scans bool
	// OnLapse is called when the refresher finds the token lapsed (it
	// expired, or the server lost it with the bucket), before it registers
	// the worker again: a collector may have passed the worker's
	// transactions meanwhile, so the worker adopts the safe point the
	// collections persisted there. Until it returns nil the worker is not
	// registered again (the next refresh tries anew). The lease's term
	// (see Held) has changed already, so the transactions begun before
	// fail. Default: none.
	OnLapse func(ctx context.Context) error
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *LivenessOptions) EnsureDefaults() *LivenessOptions {
	if o.Bucket == "" {
		o.Bucket = "trickle_workers"
	}
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = o.TTL / 3
	}
	if o.CacheFor == 0 {
		o.CacheFor = o.TTL / 10
	}
	if o.Info == "" {
		host, _ := os.Hostname()
		o.Info = fmt.Sprintf("host=%s pid=%d", host, os.Getpid())
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

var bucketNameRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Validate reports the first unusable field.
func (o *LivenessOptions) Validate() error {
	bad := func(field, why string) error { return fmt.Errorf("%w: %s %s", ErrInvalidOptions, field, why) }
	if err := validTTL(o.TTL); err != nil {
		return bad("TTL", err.Error())
	}
	switch {
	case !bucketNameRe.MatchString(o.Bucket):
		return bad("Bucket", "must be letters, digits, '-' and '_'")
	case o.RefreshInterval <= 0 || o.RefreshInterval >= o.TTL:
		return bad("RefreshInterval", "must be positive and shorter than TTL")
	case o.CacheFor >= o.TTL:
		return bad("CacheFor", "must be shorter than TTL")
	case o.Replicas < 1 || o.Replicas > 5:
		return bad("Replicas", "must be within 1..5")
	case o.Logger == nil:
		return bad("Logger", "must be set (call EnsureDefaults)")
	}
	return nil
}

// token is a worker's liveness record, the value under its key.
type token struct {
	ID           string `json:"id"`
	Info         string `json:"info,omitempty"`
	Instance     string `json:"instance"` // random per process: tells incarnations of an ID apart
	TTLSeconds   int64  `json:"ttl_s"`
	OldestActive uint64 `json:"oldest_active,omitempty"`
	// Writes numbers the token's writes since its worker (re)registered,
	// from 1: ClusterOldestActive trusts OldestActive only from a write
	// whose payload was computed after its first listing, which a count
	// of writes tells and a revision does not.
	Writes uint64 `json:"writes,omitempty"`
	Scans  bool   `json:"scans,omitempty"`
}

// Liveness registers this worker as alive in a JetStream KV bucket and tells
// whether other workers are: it implements framework.Liveness, so that a
// lock resolver can roll back a crashed worker's locks as soon as its token
// expires instead of waiting for the lock TTL.
//
// The token is written with a per-key TTL and rewritten every
// RefreshInterval by a goroutine; Close deletes it, while a crashed process
// simply stops refreshing and the server expires it.
type Liveness struct {
	js       jetstream.JetStream
	kv       jetstream.KeyValue
	spec     bucketSpec
	opts     LivenessOptions
	id       string
	key      string
	subject  string
	instance string
	log      *slog.Logger

	mu      sync.Mutex // serializes token writes; guards the fields below
	rev     uint64     // revision of our last write
	writes  uint64     // token.Writes of our last write
	closed  bool
	crashed bool // test hook: stopped without deleting

	// stopping tells the refresher that its context ends on purpose
	// (Close, crash). It is not under mu, which a refresh holds for its
	// round trip: Close cuts that round trip short instead of waiting.
	stopping atomic.Bool

	stopLoop  context.CancelFunc
	loopDone  chan struct{}
	closeOnce sync.Once
	closeErr  error

	cacheMu sync.Mutex
	cache   map[string]aliveEntry
	// now is the clock of the Alive cache: time.Now, except in tests that
	// step it to expire cached answers without waiting.
	now func() time.Time

	// The lease (see Held): valid until validUntil (nanoseconds after
	// born, on leaseNow's clock) in term. leaseClock, if set, replaces
	// time.Now (tests step it; the refresher reads it, hence atomic).
	born       time.Time
	validUntil atomic.Int64
	term       atomic.Uint64
	leaseClock atomic.Pointer[func() time.Time]
}

// leaseNow is the lease's clock.
func (l *Liveness) leaseNow() time.Time {
	if f := l.leaseClock.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// NewLiveness registers workerID as alive in the bucket until Close.
//
// It creates the bucket if needed and refreshes the worker's token until
// Close or until ctx ends; pass a context that lives as long as the worker,
// since when it ends the token lapses and other workers presume this one
// dead. Register before taking any lock, so that no one caches "dead" for
// this worker.
//
// It fails with ErrWorkerIDInUse if a live token for workerID exists: give
// each process its own ID (or wait out TTL after a crash).
func NewLiveness(ctx context.Context, js jetstream.JetStream, workerID string, opts LivenessOptions) (*Liveness, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	key, ok := workerKey(workerID)
	if !ok {
		return nil, fmt.Errorf("%w: worker ID must be 1..%d bytes", ErrInvalidOptions, maxWorkerIDLen)
	}
	spec := bucketSpec{
		name:        opts.Bucket,
		description: "trickle worker liveness tokens",
		replicas:    opts.Replicas,
	}
	kv, err := ensureBucket(ctx, js, spec)
	if err != nil {
		return nil, err
	}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	l := &Liveness{
		js:       js,
		kv:       kv,
		spec:     spec,
		opts:     opts,
		id:       workerID,
		key:      key,
		subject:  kvSubject(js, opts.Bucket, key),
		instance: hex.EncodeToString(nonce[:]),
		log:      opts.Logger.With("worker", workerID),
		cache:    make(map[string]aliveEntry),
		now:      time.Now,
		loopDone: make(chan struct{}),
	}
	l.born = l.leaseNow()
	l.term.Store(1)
	sent := l.leaseNow()
	rev, err := kv.Create(ctx, key, l.payload(1), jetstream.KeyTTL(opts.TTL))
	if err != nil {
		if isWrongLastSeq(err) {
			return nil, l.inUseError(ctx)
		}
		return nil, fmt.Errorf("cluster: register worker %q: %w", workerID, err)
	}
	l.rev, l.writes = rev, 1
	l.extend(sent)

	loopCtx, cancel := context.WithCancel(ctx)
	l.stopLoop = cancel
	go l.refreshLoop(loopCtx)
	return l, nil
}

// workerKey maps a worker ID to its KV key: "id.<id>" for IDs made of
// letters, digits, '-' and '_' (UUIDs, host names), readable in the nats
// CLI; "b64.<base64url(id)>" for anything else.
func workerKey(id string) (string, bool) {
	if id == "" || len(id) > maxWorkerIDLen {
		return "", false
	}
	if bucketNameRe.MatchString(id) {
		return "id." + id, true
	}
	return "b64." + base64.RawURLEncoding.EncodeToString([]byte(id)), true
}

// payload is the token of the writes-th write since registering, with
// what OldestActive returns now.
func (l *Liveness) payload(writes uint64) []byte {
	b, _ := json.Marshal(token{
		ID:           l.id,
		Info:         l.opts.Info,
		Instance:     l.instance,
		TTLSeconds:   int64(l.opts.TTL / time.Second),
		OldestActive: l.oldestActive(),
		Writes:       writes,
		Scans:        l.opts.Scans,
	})
	return b
}

func (l *Liveness) oldestActive() uint64 {
	if l.opts.OldestActive == nil {
		return 0
	}
	return l.opts.OldestActive()
}

// inUseError describes the live token that blocks registering l.id.
func (l *Liveness) inUseError(ctx context.Context) error {
	info := "unknown"
	if e, err := l.kv.Get(ctx, l.key); err == nil {
		var t token
		if json.Unmarshal(e.Value(), &t) == nil {
			info = fmt.Sprintf("%q, refreshed %s", t.Info, e.Created().Format(time.RFC3339))
		}
	}
	return fmt.Errorf("%w: %q (holder: %s)", ErrWorkerIDInUse, l.id, info)
}

// ID returns the worker ID this Liveness registered.
func (l *Liveness) ID() string { return l.id }

func (l *Liveness) refreshLoop(ctx context.Context) {
	defer close(l.loopDone)
	t := time.NewTicker(l.opts.RefreshInterval)
	defer t.Stop()
	var down outage
	for {
		select {
		case <-ctx.Done():
			if !l.stopping.Load() {
				l.log.Warn("liveness refresher stopped by its context; the token will expire", "ttl", l.opts.TTL)
			}
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, l.opts.RefreshInterval)
			err := l.refresh(rctx)
			cancel()
			switch {
			case err == nil:
				if n, lasted := down.ok(time.Now()); n > 0 {
					l.log.Info("liveness refresh works again", "failures", n, "outage", lasted.Round(time.Millisecond))
				}
			case ctx.Err() != nil:
			case down.fail(time.Now(), l.opts.TTL):
				// Once per TTL while it lasts: past TTL other workers
				// presume this one dead and resolve its locks.
				l.log.Warn("liveness refresh failing", "err", err, "failures", down.failures, "since", down.since.Format(time.RFC3339), "ttl", l.opts.TTL)
			default:
				l.log.Debug("liveness refresh failed", "err", err, "failures", down.failures)
			}
		}
	}
}

// Refresh rewrites the token now, resetting its TTL and publishing what
// Options.OldestActive returns now. The refresher calls it every
// RefreshInterval.
func (l *Liveness) Refresh(ctx context.Context) error {
	return l.refresh(ctx)
}

func (l *Liveness) refresh(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.crashed {
		return ErrClosed
	}
	sent := l.leaseNow()
	body := l.payload(l.writes + 1)
	rev, err := l.put(ctx, body, l.rev)
	if err == nil {
		l.rev, l.writes = rev, l.writes+1
		l.extend(sent)
		return nil
	}
	// A new registration counts its writes from 1 again, with a payload
	// computed now: body's may predate a collector's listing that found
	// the token gone.
	if bucketLost(err) {
		// The server lost the bucket (it restarted): every token is gone,
		// ours too. Create the bucket again and register anew.
		if err := l.lapse(ctx); err != nil {
			return err
		}
		if _, err := ensureBucket(ctx, l.js, l.spec); err != nil {
			return fmt.Errorf("cluster: refresh worker %q: recreating the lost bucket: %w", l.id, err)
		}
		sent := l.leaseNow()
		rev, err := l.kv.Create(ctx, l.key, l.payload(1), jetstream.KeyTTL(l.opts.TTL))
		if err != nil {
			return fmt.Errorf("cluster: re-register worker %q in the recreated bucket: %w", l.id, err)
		}
		l.rev, l.writes = rev, 1
		l.extend(sent)
		l.log.Warn("liveness bucket was lost (NATS server restarted); recreated it and re-registered")
		return nil
	}
	if !isWrongLastSeq(err) {
		return fmt.Errorf("cluster: refresh worker %q: %w", l.id, err)
	}
	// The key changed under us: it expired (the server's marker is a write
	// of its own), or another process wrote it.
	e, err := l.kv.Get(ctx, l.key)
	switch {
	case notFound(err):
		if err := l.lapse(ctx); err != nil {
			return err
		}
		sent := l.leaseNow()
		rev, err := l.kv.Create(ctx, l.key, l.payload(1), jetstream.KeyTTL(l.opts.TTL))
		if err != nil {
			return fmt.Errorf("cluster: re-register worker %q: %w", l.id, err)
		}
		l.rev, l.writes = rev, 1
		l.extend(sent)
		l.log.Warn("liveness token had expired and was re-registered; other workers may have presumed this worker dead meanwhile")
		return nil
	case err != nil:
		return fmt.Errorf("cluster: refresh worker %q: %w", l.id, err)
	}
	var t token
	if json.Unmarshal(e.Value(), &t) == nil && t.Instance == l.instance {
		// Our own write whose acknowledgement we lost.
		if rev, err = l.put(ctx, body, e.Revision()); err != nil {
			return fmt.Errorf("cluster: refresh worker %q: %w", l.id, err)
		}
		l.rev, l.writes = rev, l.writes+1
		l.extend(sent)
		return nil
	}
	return fmt.Errorf("%w: %q (holder: %q); not overwriting its token", ErrWorkerIDInUse, l.id, t.Info)
}

// leaseMargin is the share of TTL the lease gives back to the token's
// expiry on the server: the server counts TTL from when it received a
// write, later than when it was sent, from which the lease counts; the
// margin covers clocks that run at slightly different rates.
const leaseMargin = 10

// extend makes the lease hold until TTL (less the margin) after sent, the
// time the write that just succeeded was sent. l.mu is held.
func (l *Liveness) extend(sent time.Time) {
	l.validUntil.Store(int64(sent.Sub(l.born) + l.opts.TTL - l.opts.TTL/leaseMargin))
}

// lapse ends the lease's term once the token was found gone: transactions
// begun in it fail from now on (see Held), and OnLapse adopts what a
// collection may have done meanwhile. l.mu is held.
func (l *Liveness) lapse(ctx context.Context) error {
	l.validUntil.Store(0)
	l.term.Add(1)
	if l.opts.OnLapse == nil {
		return nil
	}
	if err := l.opts.OnLapse(ctx); err != nil {
		return fmt.Errorf("cluster: worker %q lapsed, and what a collection may have done meanwhile could not be adopted; not registering again yet: %w", l.id, err)
	}
	return nil
}

// Held reports the lease this worker holds (framework.Lease): its term,
// which changes each time the token was found lapsed and registered anew,
// and whether it holds now — whether the last write of the token was sent
// less than TTL (less a margin) ago, on this process's monotonic clock,
// so that the token cannot have expired on the server yet. A process that
// was paused, or whose refreshes failed, for longer loses it at once,
// before its refresher notices; its transactions then stop reading (a
// collection may have passed them) until the token is written again.
func (l *Liveness) Held() (term uint64, ok bool) {
	term = l.term.Load()
	return term, int64(l.leaseNow().Sub(l.born)) < l.validUntil.Load()
}

// put writes the token with a fresh per-key TTL if its revision is still
// expectRev. The KV API sets TTLs only on Create, hence the raw publish.
func (l *Liveness) put(ctx context.Context, body []byte, expectRev uint64) (uint64, error) {
	ack, err := l.js.PublishMsg(ctx, &nats.Msg{Subject: l.subject, Data: body},
		jetstream.WithMsgTTL(l.opts.TTL),
		jetstream.WithExpectLastSequencePerSubject(expectRev))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// Close stops refreshing and deletes the token, so that other workers see
// this one dead at once (except for answers they cached within CacheFor).
// It does not wait for a NATS server it is not connected to, nor longer
// than RefreshInterval for one it is: the token then expires by itself.
// It is idempotent; Alive and Workers keep working after it.
func (l *Liveness) Close() error {
	l.closeOnce.Do(func() {
		// Stopping the refresher cancels a refresh under way.
		l.stopping.Store(true)
		l.stopLoop()
		<-l.loopDone
		l.mu.Lock()
		defer l.mu.Unlock()
		l.closed = true
		l.validUntil.Store(0)
		wasCrashed := l.crashed
		l.forget(l.id)
		if wasCrashed {
			return
		}
		// Deleting the token only tells the others sooner: it expires
		// within TTL anyway. So a process whose NATS server is gone exits
		// at once, and one whose server is slow waits a refresh interval
		// at most.
		if !l.js.Conn().IsConnected() {
			l.log.Debug("not connected to NATS: the liveness token is left to expire", "ttl", l.opts.TTL)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.opts.RefreshInterval)
		defer cancel()
		if err := l.deleteOwn(ctx); err != nil {
			l.closeErr = fmt.Errorf("cluster: delete token of worker %q: %w", l.id, err)
		}
	})
	return l.closeErr
}

// deleteOwn deletes the token if it is still this process's. l.mu is held.
func (l *Liveness) deleteOwn(ctx context.Context) error {
	err := l.kv.Purge(ctx, l.key, jetstream.LastRevision(l.rev), jetstream.PurgeTTL(markerTTL))
	if !isWrongLastSeq(err) {
		return err
	}
	// The token expired, belongs to another process, or holds a refresh
	// that Close interrupted after the server applied it. Only the last is
	// ours to delete.
	e, err := l.kv.Get(ctx, l.key)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var t token
	if json.Unmarshal(e.Value(), &t) != nil || t.Instance != l.instance {
		return nil
	}
	err = l.kv.Purge(ctx, l.key, jetstream.LastRevision(e.Revision()), jetstream.PurgeTTL(markerTTL))
	if isWrongLastSeq(err) {
		return nil // changed again meanwhile: not ours any more
	}
	return err
}

// crash simulates a crashed process for tests: refreshing stops, and the
// token is left to expire.
func (l *Liveness) crash() {
	l.stopping.Store(true)
	l.stopLoop()
	<-l.loopDone
	l.mu.Lock()
	l.crashed = true
	l.validUntil.Store(0)
	l.mu.Unlock()
}
