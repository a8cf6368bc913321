package remote

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// transferOverhead is charged against the memory cap for every transfer
// on top of its bytes, so that a flood of tiny forged opens is bounded
// too.
const transferOverhead = 1 << 10

// partHeadroom is the part of the max payload a part message leaves
// unused: room for headers a NATS system may add, beyond our frame header
// (which senders measure exactly).
const partHeadroom = 256

// transfer is a message a service receives (upload) or sends (download)
// in parts.
type transfer struct {
	id     uint64
	upload bool
	// name, subject and h are those of the endpoint the upload is for (a
	// download: the endpoint that answered).
	name, subject string
	h             handlerFunc
	// buf is the message: for an upload, what has arrived so far (its
	// capacity is the whole size); for a download, all of it.
	buf   []byte
	total int
	sum   uint32
	// next is the part expected next (upload) or pulled next (download);
	// sent is how much of a download has been sent.
	next uint64
	sent int
	// expires is when the transfer is dropped (on the table's clock);
	// opened is when it began (wall clock), so that the request handled
	// after an upload gets what is left of the client's timeout.
	expires time.Time
	opened  time.Time
	cost    int64
	// idle, for a download, is how long each pull keeps it from then on,
	// but never past last.
	idle time.Duration
	last time.Time
}

// transfers holds a service's transfers in progress within a byte cap,
// each until its deadline. A timer set for the earliest deadline drops
// abandoned ones even when no other traffic arrives.
type transfers struct {
	limit    int64
	now      func() time.Time
	onExpire func(id uint64, upload bool)
	log      *slog.Logger

	mu     sync.Mutex
	held   int64
	nextID uint64
	m      map[uint64]*transfer
	// earliest is no later than the first deadline in m (zero: none to
	// watch); the timer is armed for it.
	earliest time.Time
	timer    *time.Timer
	closed   bool
}

func newTransfers(cfg *ServiceOptions, log *slog.Logger) *transfers {
	now := cfg.now
	if now == nil {
		now = time.Now
	}
	return &transfers{limit: cfg.MaxBufferedBytes, now: now, onExpire: cfg.onExpire, log: log, m: make(map[uint64]*transfer)}
}

// reserveLocked charges a message of size bytes (plus the transfer's
// overhead) against the cap and returns the charge. what names the
// message for the error.
func (ts *transfers) reserveLocked(size uint64, what string) (int64, error) {
	if ts.closed {
		return 0, fmt.Errorf("%w: service stopping", ErrUnavailable)
	}
	if size > uint64(ts.limit-transferOverhead) {
		return 0, fmt.Errorf("%w: %s of %d bytes exceeds the service's limit of %d bytes for messages in parts",
			ErrTooLarge, what, size, ts.limit)
	}
	cost := int64(size) + transferOverhead
	if ts.held+cost > ts.limit {
		return 0, fmt.Errorf("%w: %s of %d bytes does not fit: %d of the service's %d bytes for messages in parts are taken",
			ErrBusy, what, size, ts.held, ts.limit)
	}
	ts.held += cost
	return cost, nil
}

// addLocked registers t under a fresh id and, if it expires first, arms
// the expiry timer for it.
func (ts *transfers) addLocked(t *transfer) {
	ts.nextID++
	t.id = ts.nextID
	ts.m[t.id] = t
	if ts.earliest.IsZero() || t.expires.Before(ts.earliest) {
		ts.earliest = t.expires
		ts.armLocked()
	}
}

// dropLocked forgets t and frees its bytes.
func (ts *transfers) dropLocked(t *transfer) {
	if ts.m[t.id] == t {
		delete(ts.m, t.id)
		ts.held -= t.cost
	}
}

// openUpload starts an upload for endpoint name from its open frame. If
// the frame holds the whole message, done is true and the upload is
// already forgotten: t.buf is the request.
func (ts *transfers) openUpload(name, subject string, h handlerFunc, f *frame, handlerTimeout time.Duration) (t *transfer, done bool, err error) {
	ts.mu.Lock()
	ts.sweepLocked()
	cost, err := ts.reserveLocked(f.total, "request")
	ts.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	// The allocation happens outside the lock; the bytes are reserved.
	buf := make([]byte, 0, f.total)
	buf = append(buf, f.chunk...)
	life := handlerTimeout
	if f.timeout > 0 && f.timeout < life {
		life = f.timeout
	}
	t = &transfer{upload: true, name: name, subject: subject, h: h, buf: buf, total: int(f.total),
		sum: f.sum, next: 1, cost: cost, opened: time.Now()}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		ts.held -= cost
		return nil, false, fmt.Errorf("%w: service stopping", ErrUnavailable)
	}
	t.expires = ts.now().Add(life)
	if len(buf) == t.total {
		ts.held -= cost
		return t, true, t.verify()
	}
	ts.addLocked(t)
	return t, false, nil
}

// addPart appends a part to its upload. When the part completes the
// upload, done is true, the upload is forgotten and t.buf is the request.
// Any error drops the upload: a request is never handled without all of
// its parts. t is returned with errors too when the upload was known, so
// the error can be charged to its endpoint.
func (ts *transfers) addPart(f *frame) (t *transfer, done bool, err error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.sweepLocked()
	t = ts.m[f.id]
	if t == nil || !t.upload {
		return nil, false, fmt.Errorf("%w: part %d of unknown upload %d (expired, failed or never opened)", ErrProtocol, f.seq, f.id)
	}
	if f.seq != t.next {
		ts.dropLocked(t)
		return t, false, fmt.Errorf("%w: upload %d: got part %d, want part %d: a part was lost, repeated or reordered; the upload is dropped",
			ErrProtocol, t.id, f.seq, t.next)
	}
	if len(t.buf)+len(f.chunk) > t.total {
		ts.dropLocked(t)
		return t, false, fmt.Errorf("%w: upload %d: part %d of %d bytes overruns the announced %d bytes (%d received); the upload is dropped",
			ErrProtocol, t.id, f.seq, len(f.chunk), t.total, len(t.buf))
	}
	// Copying under the lock serializes it with other parts, which arrive
	// on one subscription anyway.
	t.buf = append(t.buf, f.chunk...)
	t.next++
	if len(t.buf) < t.total {
		return t, false, nil
	}
	ts.dropLocked(t)
	return t, true, t.verify()
}

// verify checks a complete upload's checksum.
func (t *transfer) verify() error {
	if sum := checksum(t.buf); sum != t.sum {
		return fmt.Errorf("%w: upload %d: checksum %08x of the %d reassembled bytes, want %08x; the upload is dropped",
			ErrProtocol, t.id, sum, t.total, t.sum)
	}
	return nil
}

// openDownload holds msg, an answer of endpoint name too large for one
// message, for the client to pull: its first pull within life, each
// further one within idle of the one before, all within maxLife. It
// returns the transfer with its first chunk of at most chunk bytes
// counted as sent.
func (ts *transfers) openDownload(name, subject string, msg []byte, life, idle, maxLife time.Duration, chunk int) (*transfer, []byte, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.sweepLocked()
	cost, err := ts.reserveLocked(uint64(len(msg)), "response")
	if err != nil {
		return nil, nil, fmt.Errorf("%w (the request was executed; its response is dropped)", err)
	}
	now := ts.now()
	t := &transfer{name: name, subject: subject, buf: msg, total: len(msg), sum: checksum(msg),
		next: 1, cost: cost, opened: time.Now(), expires: now.Add(min(life, maxLife)), idle: idle, last: now.Add(maxLife)}
	t.sent = min(chunk, t.total)
	ts.addLocked(t)
	return t, msg[:t.sent], nil
}

// pull returns the next chunk of a download, at most maxChunk bytes. The
// download is forgotten after its last chunk, or at the first error.
func (ts *transfers) pull(f *frame, maxChunk int) (t *transfer, chunk []byte, err error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.sweepLocked()
	t = ts.m[f.id]
	if t == nil || t.upload {
		return nil, nil, fmt.Errorf("%w: pull of part %d of unknown download %d (expired, complete or never opened)", ErrProtocol, f.seq, f.id)
	}
	if f.seq != t.next {
		ts.dropLocked(t)
		return t, nil, fmt.Errorf("%w: download %d: pull of part %d, want part %d; the download is dropped", ErrProtocol, t.id, f.seq, t.next)
	}
	n := min(maxChunk, t.total-t.sent)
	chunk = t.buf[t.sent : t.sent+n]
	t.sent += n
	t.next++
	if t.sent == t.total {
		ts.dropLocked(t)
	} else {
		until := ts.now().Add(t.idle)
		if until.After(t.last) {
			until = t.last
		}
		if until.After(t.expires) {
			// The timer may fire for the old deadline; the sweep then
			// finds this one and re-arms.
			t.expires = until
		}
	}
	return t, chunk, nil
}

// abort drops a transfer a client gave up on.
func (ts *transfers) abort(id uint64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t := ts.m[id]; t != nil {
		ts.dropLocked(t)
	}
}

// sweepLocked drops the transfers past their deadline. It costs nothing
// until the earliest deadline has passed.
func (ts *transfers) sweepLocked() {
	if ts.earliest.IsZero() {
		return
	}
	now := ts.now()
	if now.Before(ts.earliest) {
		return
	}
	ts.earliest = time.Time{}
	for _, t := range ts.m {
		if now.Before(t.expires) {
			if ts.earliest.IsZero() || t.expires.Before(ts.earliest) {
				ts.earliest = t.expires
			}
			continue
		}
		ts.dropLocked(t)
		kind, done := "download", t.sent
		if t.upload {
			kind, done = "upload", len(t.buf)
		}
		ts.log.Info("remote: dropped an abandoned "+kind, "endpoint", t.name, "id", t.id, "bytes", t.total, "done", done)
		if ts.onExpire != nil {
			ts.onExpire(t.id, t.upload)
		}
	}
}

// armLocked sets the timer for the earliest deadline, so that abandoned
// transfers are dropped even when no other traffic comes.
func (ts *transfers) armLocked() {
	if ts.closed || ts.earliest.IsZero() {
		return
	}
	d := max(ts.earliest.Sub(ts.now()), time.Millisecond)
	if ts.timer == nil {
		ts.timer = time.AfterFunc(d, ts.expire)
	} else {
		ts.timer.Reset(d)
	}
}

// expire runs on the timer.
func (ts *transfers) expire() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.sweepLocked()
	ts.armLocked()
}

// bytesHeld returns the bytes charged against the cap.
func (ts *transfers) bytesHeld() int64 {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.held
}

// close drops every transfer; later opens fail with ErrUnavailable.
func (ts *transfers) close() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.closed = true
	for _, t := range ts.m {
		ts.dropLocked(t)
	}
	if ts.timer != nil {
		ts.timer.Stop()
	}
}
