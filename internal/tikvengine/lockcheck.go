package tikvengine

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/tikv/client-go/v2/oracle"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/txnkv/txnlock"
)

// A notification key is a secondary of its writer's transaction: after
// the primary committed it can stay a lock for a while (client-go commits
// secondaries in the background; with async commit every key is a lock
// when Commit returns), and for good if the writer's process dies first,
// until someone resolves it. Find reads at read-committed, which never
// sees a lock, so it also checks the range's locks now and then: a lock
// older than its TTL is resolved as TiKV's readers resolve one (its
// primary says committed or rolled back), and every lock found is yielded
// as a cell that may have work, so that no committed notification stays
// invisible to finding work, to wait or to status.

// lockScanLimit is how many locks one ScanLock request returns at most.
const lockScanLimit = 1024

// lockChecks keeps when Find last checked each table's locks.
type lockChecks struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// due reports whether a check of table's locks is due at now, every
// interval, and if so counts one as made.
func (l *lockChecks) due(table string, now time.Time, every time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[table]; ok && now.Sub(t) < every {
		return false
	}
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	l.last[table] = now
	return true
}

// expired reports whether lock is older than its TTL at ts, on PD's clock
// (the physical part of the timestamps), as TiKV judges it. Resolving a
// lock that is not expired after all does no harm: its primary says it
// lives, and the lock stays.
func expired(lock *txnlock.Lock, ts uint64) bool {
	return oracle.ExtractPhysical(ts) >= oracle.ExtractPhysical(lock.TxnID)+int64(lock.TTL)
}

// lockedKeys returns the keys of [lower, upper) locked by transactions
// that started at or below ts, sorted, after resolving the locks older
// than their TTL. A resolution that fails is logged and left to the next
// check; the key is returned all the same.
func (db *DB) lockedKeys(ctx context.Context, lower, upper []byte, ts uint64) ([][]byte, error) {
	scanCtx, cancel := db.deadline(ctx)
	defer cancel()
	bo := tikvclient.NewBackofferWithVars(scanCtx, int(db.opts.RequestTimeout.Milliseconds()), nil)
	resolver := tikvclient.NewRegionLockResolver("trickle-find", db.kv)
	var out [][]byte
	var old []*txnlock.Lock
	for key := lower; ; {
		locks, loc, err := resolver.ScanLocksInOneRegion(bo, key, upper, ts, lockScanLimit)
		if err != nil {
			return nil, failIn(scanCtx, "scanning the locks of notifications", err)
		}
		for _, l := range locks {
			if bytes.Compare(l.Key, lower) < 0 || (upper != nil && bytes.Compare(l.Key, upper) >= 0) {
				continue // outside the range asked for
			}
			out = append(out, l.Key)
			if expired(l, ts) {
				old = append(old, l)
			}
		}
		switch {
		case len(locks) == lockScanLimit:
			key = append(bytes.Clone(locks[len(locks)-1].Key), 0)
		case len(loc.EndKey) == 0 || (upper != nil && bytes.Compare(loc.EndKey, upper) >= 0):
			return db.resolveOld(ctx, ts, old, out)
		default:
			key = loc.EndKey
		}
	}
}

// resolveBudget bounds the time a check spends resolving old locks: a
// lock whose primary is not written yet (its writer prewrites in
// parallel) makes client-go back off until the lock's TTL runs out, and a
// pass must not wait for that. What is left unresolved is tried again by
// the next check.
const resolveBudget = time.Second

// resolveOld resolves locks past their TTL, then returns keys sorted. A
// resolution that fails or runs out of its budget is logged and left to
// the next check; only the caller's context ending fails it.
func (db *DB) resolveOld(ctx context.Context, ts uint64, old []*txnlock.Lock, keys [][]byte) ([][]byte, error) {
	if len(old) > 0 {
		rctx, cancel := context.WithTimeout(ctx, resolveBudget)
		bo := tikvclient.NewBackofferWithVars(rctx, int(resolveBudget.Milliseconds()), nil)
		_, err := db.kv.GetLockResolver().ResolveLocks(bo, ts, old)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, failIn(ctx, "resolving the locks of notifications", err)
			}
			db.opts.Logger.Debug("tikvengine: resolving old locks of notifications; the next check tries again", "locks", len(old), "err", err)
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	return slices.CompactFunc(keys, bytes.Equal), nil
}
