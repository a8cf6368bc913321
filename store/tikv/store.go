package tikv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	tikverr "github.com/tikv/client-go/v2/error"
	"github.com/tikv/client-go/v2/kv"
	"github.com/tikv/client-go/v2/oracle"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/txnkv/txnsnapshot"

	"github.com/trickle-dev/trickle/internal/keys"
	"github.com/trickle-dev/trickle/internal/tikvcall"
	"github.com/trickle-dev/trickle/store"
	glayout "github.com/trickle-dev/trickle/store/internal/layout"
)

// ErrUndetermined is matched (with store.ErrUnavailable) by the error of a
// row transaction whose commit TiKV could not confirm: it may or may not
// have been applied.
var ErrUndetermined = errors.New("store/tikv: commit result undetermined")

// Store is a store.Store on a TiKV cluster. It is safe for concurrent use.
type Store struct {
	kv     *tikvclient.KVStore
	owned  bool // Close closes kv
	o      Options
	log    *slog.Logger
	codec  codec
	layout *glayout.Layout

	mu        sync.Mutex
	closed    bool
	active    int
	idle      sync.Cond
	closeOnce sync.Once
	closeErr  error
	// onClose is what Close runs (see OnClose).
	onClose []func() error
}

var _ store.Store = (*Store)(nil)

// New returns a store on an open TiKV client, such as a test cluster's
// (client-go's testutils.NewMockTiKV and tikv.NewTestTiKVStore) or one the
// caller configured itself. The store does not own the client: Close leaves
// it open. opts may be nil; TLS options and Metrics are ignored.
func New(ctx context.Context, client *tikvclient.KVStore, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return newStore(ctx, client, o, false)
}

func newStore(ctx context.Context, client *tikvclient.KVStore, o Options, owned bool) (*Store, error) {
	s := &Store{kv: client, owned: owned, o: o, log: o.Logger, codec: newCodec(o.Namespace)}
	s.idle.L = &s.mu
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	l, err := s.loadLayout(ctx)
	if err != nil {
		return nil, err
	}
	s.layout = l
	s.log.Debug("store/tikv: opened", "namespace", o.Namespace, "groups", l.Groups)
	return s, nil
}

// loadLayout reads the persisted group layout, reconciles it with the
// options and persists the result if it is new or changed, in one TiKV
// transaction, retried if a concurrent open changed it meanwhile.
func (s *Store) loadLayout(ctx context.Context) (*glayout.Layout, error) {
	key := s.codec.layoutKey()
	for attempt := 0; ; attempt++ {
		txn, err := s.begin(ctx)
		if err != nil {
			return nil, err
		}
		l, changed, err := s.mergeLayout(ctx, txn.Get, key)
		if err != nil {
			txn.Rollback()
			return nil, err
		}
		if !changed {
			txn.Rollback()
			return l, nil
		}
		buf, err := json.Marshal(l)
		if err != nil {
			txn.Rollback()
			return nil, err
		}
		if err := txn.Set(key, buf); err != nil {
			txn.Rollback()
			return nil, fmt.Errorf("store/tikv: persisting group layout: %w", err)
		}
		err = txn.Commit(ctx)
		if err == nil {
			return l, nil
		}
		if !tikverr.IsErrWriteConflict(err) || attempt >= s.o.MaxConflictRetries {
			return nil, s.failIn(ctx, "persisting group layout", err)
		}
		if err := s.backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
}

// mergeLayout reads the layout with get and merges the options into it.
func (s *Store) mergeLayout(ctx context.Context, get func(context.Context, []byte, ...kv.GetOption) (kv.ValueEntry, error), key []byte) (*glayout.Layout, bool, error) {
	e, err := get(ctx, key)
	if tikverr.IsErrNotFound(err) {
		l, err := glayout.New(s.o.Groups)
		return l, true, err
	}
	if err != nil {
		return nil, false, s.failIn(ctx, "reading group layout", err)
	}
	l := &glayout.Layout{}
	if err := json.Unmarshal(e.Value, l); err != nil {
		return nil, false, fmt.Errorf("store/tikv: decoding group layout: %w", err)
	}
	if err := l.Complete(); err != nil {
		return nil, false, err
	}
	changed, err := l.Merge(s.o.Groups, func(fam, g string) {
		s.log.Warn("store/tikv: family newly mapped to a non-default group; any of its cells already in the default group are hidden",
			"family", fam, "group", g)
	})
	return l, changed, err
}

// Close waits for in-flight operations to finish and closes the store.
//
// In-flight operations include scans being consumed. Then it runs what
// OnClose was given (the transaction engine's GC barrier is deleted) and,
// if Open made the TiKV client, closes it. Later operations fail with
// store.ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		for s.active > 0 {
			s.idle.Wait()
		}
		hooks := s.onClose
		s.mu.Unlock()
		for _, f := range hooks {
			if err := f(); err != nil {
				s.closeErr = fmt.Errorf("store/tikv: closing: %w", err)
			}
		}
		if s.owned {
			if err := s.kv.Close(); err != nil {
				s.closeErr = fmt.Errorf("store/tikv: closing: %w", err)
			}
		}
	})
	return s.closeErr
}

// acquire registers an operation; it fails if the store is closed.
func (s *Store) acquire() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.active++
	return nil
}

// release ends an operation registered by acquire.
func (s *Store) release() {
	s.mu.Lock()
	s.active--
	if s.active == 0 && s.closed {
		s.idle.Broadcast()
	}
	s.mu.Unlock()
}

// deadline bounds ctx by Options.RequestTimeout unless it ends earlier.
func (s *Store) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && !d.After(time.Now().Add(s.o.RequestTimeout)) {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.o.RequestTimeout)
}

// timestamp returns a fresh timestamp from PD.
func (s *Store) timestamp(ctx context.Context) (uint64, error) {
	ts, err := s.kv.GetOracle().GetTimestamp(ctx, &oracle.Option{TxnScope: oracle.GlobalTxnScope})
	if err != nil {
		return 0, s.failIn(ctx, "getting a timestamp from PD", err)
	}
	return ts, nil
}

// snapshot returns a snapshot of the cluster at a fresh timestamp whose
// requests stop retrying once ctx ends (client-go's scans take no context
// of their own), and the function that releases that watch.
func (s *Store) snapshot(ctx context.Context) (*txnsnapshot.KVSnapshot, func() bool, error) {
	ts, err := s.timestamp(ctx)
	if err != nil {
		return nil, nil, err
	}
	snap := s.kv.GetSnapshot(ts)
	return snap, tikvcall.Watch(ctx, snap), nil
}

// failIn is fail for a request made under ctx: once ctx ended, what the
// client reports (an interrupted query, once watch stopped it) is the
// context's error, unless the outcome of a write is unknown, which the
// caller must learn whatever ended it.
func (s *Store) failIn(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !tikvcall.Undetermined(err) {
		return fmt.Errorf("store/tikv: %s: %w (%v)", what, cerr, err)
	}
	return s.fail(what, err)
}

// fail turns an error of the TiKV client into the store's: the context's
// error if ctx ended, store.ErrUnavailable (and ErrUndetermined) for an
// unreachable cluster or a commit whose result is unknown.
func (s *Store) fail(what string, err error) error {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("store/tikv: %s: %w", what, err)
	case tikvcall.Undetermined(err):
		return fmt.Errorf("store/tikv: %s: %w: %w (%v)", what, store.ErrUnavailable, ErrUndetermined, err)
	case tikvcall.Unreachable(err):
		return fmt.Errorf("store/tikv: %s: %w: %v", what, store.ErrUnavailable, err)
	}
	return fmt.Errorf("store/tikv: %s: %w", what, err)
}

// Tables lists the tables with at least one cell in group, visiting one
// key per table.
func (s *Store) Tables(ctx context.Context, group string) ([]string, error) {
	if err := store.ValidateTables(group, s.layout.Families); err != nil {
		return nil, err
	}
	gid, ok := s.layout.GroupID(group)
	if !ok {
		return nil, fmt.Errorf("store/tikv: Tables: group %q has no id", group)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	snap, stop, err := s.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	defer stop()
	snap.SetScanBatchSize(1)
	prefix := s.codec.groupPrefix(gid)
	upper := keys.PrefixSuccessor(prefix)
	var tables []string
	for from := prefix; ; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		it, err := snap.Iter(from, upper)
		if err != nil {
			return nil, s.failIn(ctx, "Tables", err)
		}
		if !it.Valid() {
			it.Close()
			return tables, nil
		}
		k, err := s.codec.strip(it.Key())
		it.Close()
		if err != nil {
			return nil, err
		}
		end, err := keys.ParseTable(k)
		if err != nil {
			return nil, fmt.Errorf("store/tikv: Tables: %w: key %x: %v", errCorrupt, k, err)
		}
		tables = append(tables, keys.UnescapeString(k[1:end]))
		from = keys.PrefixSuccessor(append(append([]byte(nil), s.codec.ns...), k[:end]...))
	}
}
