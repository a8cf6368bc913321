package tikv

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	tikverr "github.com/tikv/client-go/v2/error"
	"github.com/tikv/client-go/v2/kv"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/txnkv/transaction"
	"github.com/tikv/client-go/v2/txnkv/txnsnapshot"

	"github.com/trickle-dev/trickle/internal/tikvcall"
	"github.com/trickle-dev/trickle/store"
)

// checkBatchSize is how many versions a check's scan fetches per request:
// most checks decide on the first version they find.
const checkBatchSize = 8

// Apply executes txn atomically as one optimistic TiKV transaction (see the
// package documentation): the checks are evaluated on the transaction's
// snapshot and, if all hold, the mutations commit together with a lock of
// the row's guard key. A write conflict with a concurrent row transaction
// on the row makes it start over on a fresh snapshot, at most
// Options.MaxConflictRetries times. A failed check is not an error, as for
// every store. NoSync is ignored: TiKV commits are always replicated.
func (s *Store) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	if err := store.ValidateApply(txn); err != nil {
		return store.RowResult{FailedCheck: -1}, err
	}
	res, err := s.applyRows(ctx, []*store.RowTxn{txn})
	if err != nil {
		return store.RowResult{FailedCheck: -1}, err
	}
	return res[0], nil
}

// ApplyAll executes txns (on distinct rows) with the results Apply would
// give each: as one TiKV transaction that locks the guard keys of all rows
// written, or, if that one meets a write conflict, as one transaction per
// row. Every row transaction is validated before any runs, with the errors
// of the pebble store.
func (s *Store) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	if err := store.ValidateApplyAll(txns); err != nil {
		return nil, err
	}
	if len(txns) == 0 {
		return nil, nil
	}
	if len(txns) == 1 {
		return s.applyRows(ctx, txns)
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
	results, err := s.attempt(ctx, txns)
	if err == nil {
		return results, nil
	}
	if !tikverr.IsErrWriteConflict(err) {
		return nil, s.failIn(ctx, "ApplyAll", err)
	}
	results = make([]store.RowResult, len(txns))
	for i, txn := range txns {
		res, err := s.retry(ctx, []*store.RowTxn{txn})
		if err != nil {
			return nil, err
		}
		results[i] = res[0]
	}
	return results, nil
}

// applyRows runs txns as one TiKV transaction, retried on conflict.
func (s *Store) applyRows(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.acquire(); err != nil {
		return nil, err
	}
	defer s.release()
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	return s.retry(ctx, txns)
}

// retry runs attempt until it does not meet a write conflict (or another
// error TiKV says the whole transaction may be retried after), at most
// 1+MaxConflictRetries times, with backoff in between.
func (s *Store) retry(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	for n := 0; ; n++ {
		results, err := s.attempt(ctx, txns)
		if err == nil {
			return results, nil
		}
		if !tikverr.IsErrWriteConflict(err) && !retryable(err) || n >= s.o.MaxConflictRetries {
			return nil, s.failIn(ctx, "Apply", err)
		}
		if err := s.backoff(ctx, n); err != nil {
			return nil, err
		}
	}
}

// retryable reports an error after which TiKV says the transaction can be
// run again because none of it took effect: a commit that found its
// primary lock rolled back by another client (which takes locks whose TTL
// passed for abandoned), for one. An undetermined commit is not one.
func retryable(err error) bool {
	var r *tikverr.ErrRetryable
	return errors.As(err, &r) && !tikverr.IsErrorUndetermined(err) && !errors.Is(err, tikverr.ErrResultUndetermined)
}

// backoff waits before attempt n+1: exponential from RetryBackoffMin to
// RetryBackoffMax, with full jitter, or until ctx ends.
func (s *Store) backoff(ctx context.Context, n int) error {
	d := s.o.RetryBackoffMin << min(n, 20)
	if d > s.o.RetryBackoffMax || d <= 0 {
		d = s.o.RetryBackoffMax
	}
	d = time.Duration(rand.Int64N(int64(d) + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// begin starts an optimistic TiKV transaction at a fresh timestamp, taken
// under ctx (client-go's Begin would wait for PD without a deadline).
func (s *Store) begin(ctx context.Context) (*transaction.KVTxn, error) {
	ts, err := s.timestamp(ctx)
	if err != nil {
		return nil, err
	}
	txn, err := s.kv.Begin(tikvclient.WithStartTS(ts))
	if err != nil {
		return nil, s.failIn(ctx, "starting a transaction", err)
	}
	// A plain two-phase commit: its outcome is decided by the primary's
	// commit, which client-go reports as undetermined if it is lost.
	txn.SetEnableAsyncCommit(false)
	txn.SetEnable1PC(false)
	return txn, nil
}

// attempt evaluates txns on one TiKV transaction's snapshot and commits
// the mutations of those whose checks held, with their rows' guard keys
// locked. The error is client-go's (callers classify it).
func (s *Store) attempt(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	txn, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			txn.Rollback()
		}
	}()
	snap := txn.GetSnapshot()
	snap.SetScanBatchSize(checkBatchSize)
	defer tikvcall.Watch(ctx, snap)()
	if err := s.prefetch(ctx, snap, txns); err != nil {
		return nil, err
	}
	if err := s.checkSnapshots(ctx, snap, txns); err != nil {
		return nil, err
	}
	results := make([]store.RowResult, len(txns))
	var guards [][]byte
	for i, rt := range txns {
		res, wrote, err := s.evalRow(ctx, txn, snap, rt)
		if err != nil {
			return nil, err
		}
		results[i] = res
		if wrote {
			guards = append(guards, s.codec.guardKey(rt.Table, rt.Row))
		}
	}
	if len(guards) == 0 {
		return results, nil // nothing to write: the snapshot decided
	}
	if err := txn.LockKeysWithWaitTime(ctx, kv.LockNoWait, guards...); err != nil {
		return nil, err
	}
	committed = true
	if err := txn.Commit(ctx); err != nil {
		return nil, err
	}
	return results, nil
}

// prefetch reads every exact version that the checks and conditional
// mutations of txns will look up, in one BatchGet (one RPC per region
// they span): the snapshot keeps what it read, absent keys included, so
// each later lookup is answered from memory instead of costing an RPC.
// A transaction's prewrite checks two exact versions per cell (its lock
// and its rollback record) and its commit one, so this removes most of
// the RPCs of an ApplyAll.
func (s *Store) prefetch(ctx context.Context, snap *txnsnapshot.KVSnapshot, txns []*store.RowTxn) error {
	var keys [][]byte
	if key := s.safePointKey(txns); key != nil {
		keys = append(keys, key)
	}
	for _, rt := range txns {
		for i := range rt.Checks {
			if c := &rt.Checks[i]; c.MinTs == c.MaxTs {
				keys = append(keys, s.codec.cellKey(nil, s.layout.GroupOf(c.Column.Family), rt.Table, rt.Row, c.Column, c.MaxTs))
			}
		}
		for i := range rt.Mutations {
			if m := &rt.Mutations[i]; m.IfValuePrefix != nil {
				keys = append(keys, s.codec.cellKey(nil, s.layout.GroupOf(m.Column.Family), rt.Table, rt.Row, m.Column, m.Ts))
			}
		}
	}
	if len(keys) < 2 {
		return nil // one Get costs what the BatchGet would
	}
	_, err := snap.BatchGet(ctx, keys)
	return err
}

// evalRow evaluates one row transaction's checks on snap and, if all hold,
// buffers its mutations in txn. It reports whether it buffered a write.
func (s *Store) evalRow(ctx context.Context, txn *transaction.KVTxn, snap *txnsnapshot.KVSnapshot, rt *store.RowTxn) (store.RowResult, bool, error) {
	res := store.RowResult{FailedCheck: -1}
	for i := range rt.Checks {
		failed, conflict, err := s.evalCheck(ctx, snap, rt, &rt.Checks[i])
		if err != nil {
			return res, false, err
		}
		if failed {
			res.FailedCheck, res.Conflict = i, conflict
			return res, false, nil
		}
	}
	wrote := false
	for i := range rt.Mutations {
		m := &rt.Mutations[i]
		key := s.codec.cellKey(nil, s.layout.GroupOf(m.Column.Family), rt.Table, rt.Row, m.Column, m.Ts)
		if m.IfValuePrefix != nil {
			// Judged on the row as it was before this row transaction,
			// as the pebble store does.
			v, found, err := s.get(ctx, snap, key)
			if err != nil {
				return res, false, err
			}
			if !found || !bytes.HasPrefix(v, m.IfValuePrefix) {
				continue
			}
		}
		var err error
		if m.Delete {
			err = txn.Delete(key)
		} else {
			err = txn.Set(key, tikvcall.Frame(m.Value))
		}
		if err != nil {
			return res, false, err
		}
		wrote = true
	}
	res.Applied = true
	return res, wrote, nil
}

// get reads one key's cell value from snap.
func (s *Store) get(ctx context.Context, snap *txnsnapshot.KVSnapshot, key []byte) ([]byte, bool, error) {
	e, err := snap.Get(ctx, key)
	if tikverr.IsErrNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v, err := tikvcall.Unframe(key, e.Value, errCorrupt)
	return v, err == nil, err
}

// evalCheck evaluates one check on snap: a Get for one exact version, a
// scan of the check's versions otherwise. It reports whether the check
// failed and, for a failed MustBeAbsent check, the newest matching cell.
func (s *Store) evalCheck(ctx context.Context, snap *txnsnapshot.KVSnapshot, rt *store.RowTxn, chk *store.Check) (bool, *store.Cell, error) {
	g := s.layout.GroupOf(chk.Column.Family)
	var (
		found bool
		ts    uint64
		val   []byte
	)
	if chk.MinTs == chk.MaxTs {
		v, ok, err := s.get(ctx, snap, s.codec.cellKey(nil, g, rt.Table, rt.Row, chk.Column, chk.MaxTs))
		if err != nil {
			return false, nil, err
		}
		found, ts, val = ok && bytes.HasPrefix(v, chk.ValuePrefix), chk.MaxTs, v
	} else {
		lo, hi := s.codec.versionRange(g, rt.Table, rt.Row, chk.Column, chk.MinTs, chk.MaxTs)
		it, err := snap.Iter(lo, hi)
		if err != nil {
			return false, nil, err
		}
		for ; it.Valid(); err = it.Next() {
			v, uerr := tikvcall.Unframe(it.Key(), it.Value(), errCorrupt)
			if uerr != nil {
				it.Close()
				return false, nil, uerr
			}
			if bytes.HasPrefix(v, chk.ValuePrefix) {
				found, ts, val = true, decodeTs(it.Key()), bytes.Clone(v)
				break
			}
		}
		it.Close()
		if err != nil {
			return false, nil, err
		}
	}
	if found == (chk.Expect == store.MustExist) {
		return false, nil, nil
	}
	if chk.Expect == store.MustBeAbsent {
		return true, &store.Cell{Row: bytes.Clone(rt.Row), Column: chk.Column, Ts: ts, Value: bytes.Clone(val)}, nil
	}
	return true, nil, nil
}

// safePointKey returns the key of the safe point (Options.SafePoint) if
// one of txns carries a Snapshot to check against it, else nil.
func (s *Store) safePointKey(txns []*store.RowTxn) []byte {
	sp := s.o.SafePoint
	if sp == nil {
		return nil
	}
	for _, rt := range txns {
		if rt.Snapshot != 0 {
			return s.codec.cellKey(nil, s.layout.GroupOf(sp.Column.Family), sp.Table, sp.Row, sp.Column, 0)
		}
	}
	return nil
}

// checkSnapshots refuses txns if one carries a Snapshot below the safe
// point snap reads. A collection persists its safe point before it deletes
// anything, each in TiKV transactions of their own: a snapshot that holds
// any of its deletions holds its safe point too, and one that holds none
// evaluates the checks on what was there before. (A deletion that commits
// between this snapshot and the commit locks the row's guard key, as this
// transaction does, and one of the two starts over.)
func (s *Store) checkSnapshots(ctx context.Context, snap *txnsnapshot.KVSnapshot, txns []*store.RowTxn) error {
	key := s.safePointKey(txns)
	if key == nil {
		return nil
	}
	v, found, err := s.get(ctx, snap, key)
	if err != nil || !found || len(v) != 8 {
		return err
	}
	sp := binary.BigEndian.Uint64(v)
	for i, rt := range txns {
		if rt.Snapshot != 0 && rt.Snapshot < sp {
			op, field := "ApplyAll", fmt.Sprintf("txns[%d].Snapshot", i)
			if len(txns) == 1 {
				op, field = "Apply", "Snapshot"
			}
			return &store.SnapshotError{Op: op, Field: field, Snapshot: rt.Snapshot, SafePoint: sp}
		}
	}
	return nil
}
