package percolator

import (
	"bytes"
	"context"
	"fmt"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/internal/retry"
	"github.com/trickle-dev/trickle/oracle"
)

// resolve deals with the lock l, left on k by the transaction that started
// at lockTs: it finds out what became of that transaction from its primary
// and rolls k forward or back, or waits (with backoff) if the owner may still
// be working. It returns nil when the caller should look at k again. force
// treats a live owner as gone (garbage collection below the safe point).
func (db *DB) resolve(ctx context.Context, k protocol.Key, lockTs uint64, l *protocol.Lock, force bool, waits *int) (err error) {
	ctx, span := db.tracer.Start(ctx, "resolve lock")
	outcome := resolveWaited
	defer func() { endResolve(span, k, lockTs, l, outcome, err) }()
	primary := l.Primary
	status, err := db.txnStatus(ctx, primary, lockTs)
	if err != nil {
		return err
	}
	if status.State == protocol.StateMissing && !isSameKey(k, primary) {
		// A collection resolves every lock below its safe point before it
		// removes a primary's old commit record; the lock found before
		// that may be gone now, and the primary's records then say
		// nothing of it. Judged by them, a committed transaction would be
		// rolled back on its primary.
		held, err := db.lockHeld(ctx, k, lockTs)
		if err != nil || !held {
			outcome = resolveRetry
			return err
		}
	}
	abandoned := false
	if status.State == protocol.StateLocked || status.State == protocol.StateMissing {
		owner := l // primary missing: judge by the lock we found
		if status.State == protocol.StateLocked {
			owner = status.Lock
		}
		if abandoned, err = db.abandoned(ctx, owner); err != nil {
			return err
		}
	}
	switch protocol.Decide(status, abandoned, force) {
	case protocol.ActionRollForward:
		outcome = resolveRolledForward
		return db.rollForward(ctx, k, lockTs, status.CommitTs, l)
	case protocol.ActionRollBack:
		outcome = resolveRolledBack
		return db.rollBack(ctx, k, lockTs, isSameKey(k, primary))
	case protocol.ActionRollBackPrimary:
		outcome = resolvePrimaryAborted
		committed, err := db.rollBackPrimary(ctx, primary, lockTs)
		if err != nil || committed {
			if committed {
				outcome = resolveRetry
			}
			return err // committed meanwhile: look again, the next round rolls forward
		}
		if isSameKey(k, primary) {
			return nil
		}
		return db.rollBack(ctx, k, lockTs, false)
	default:
		*waits++
		db.stats.LockWaits.Add(1)
		if err := retry.Sleep(ctx, retry.Backoff(*waits, db.opts.LockWaitMin, db.opts.LockWaitMax)); err != nil {
			return fmt.Errorf("waiting for lock of transaction %d held by %q: %w", lockTs, l.Holder, err)
		}
		return nil
	}
}

// endResolve ends a lock resolution's span with its outcome.
func endResolve(span trace.Span, k protocol.Key, lockTs uint64, l *protocol.Lock, outcome string, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(attrKey.String(k.String()), attrLockTs.Int64(int64(lockTs)), attrHolder.String(l.Holder), attrOutcome.String(outcome))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func isSameKey(a, b protocol.Key) bool {
	return a.Table == b.Table && a.Column == b.Column && bytes.Equal(a.Row, b.Row)
}

// txnStatus reads what became of the transaction that started at startTs
// from its primary k. A commit is remembered (see committedCache).
func (db *DB) txnStatus(ctx context.Context, k protocol.Key, startTs uint64) (protocol.Status, error) {
	if commitTs, ok := db.committed.get(startTs); ok {
		return protocol.Status{State: protocol.StateCommitted, CommitTs: commitTs}, nil
	}
	cells, err := db.st.ReadRow(ctx, k.Table, k.Row, []Column{k.Column}, protocol.StatusSpans(startTs))
	if err != nil {
		return protocol.Status{}, fmt.Errorf("status of %d at %s: %w", startTs, k, err)
	}
	st, err := protocol.InterpretStatus(cells, startTs)
	if err == nil && st.State == protocol.StateCommitted {
		db.committed.add(startTs, st.CommitTs)
	}
	return st, err
}

// abandoned judges a lock's owner on the oracle's clock and by liveness.
func (db *DB) abandoned(ctx context.Context, l *protocol.Lock) (bool, error) {
	if l.Holder == db.opts.WorkerID && db.gaveUp(l.StartTs) {
		// A lock of a transaction of ours that ended without committing or
		// cleaning up (the store stopped answering mid-commit): nobody
		// will finish it, so it need not wait out its TTL.
		return true, nil
	}
	// This process is alive by definition; anyone else's liveness is asked.
	if l.Holder != db.opts.WorkerID && db.opts.Liveness != nil {
		alive, err := db.opts.Liveness.Alive(ctx, l.Holder)
		if err != nil {
			db.opts.Logger.WarnContext(ctx, "liveness check failed; relying on lock TTL", "holder", l.Holder, "err", err)
		} else if !alive {
			return true, nil
		}
	}
	now, err := db.or.Timestamp(ctx)
	if err != nil {
		return false, fmt.Errorf("oracle time for lock expiry: %w", err)
	}
	return l.Expired(oracle.PhysicalMillis(now)), nil
}

// writeFromLock is the write record a lock turns into when committed. Both
// the committer and roll-forward build it from the lock, so they agree.
func writeFromLock(startTs uint64, l *protocol.Lock) *protocol.Write {
	return &protocol.Write{StartTs: startTs, Op: l.Op, Inline: l.Inline, Value: l.Value}
}

func (db *DB) rollForward(ctx context.Context, k protocol.Key, startTs, commitTs uint64, l *protocol.Lock) error {
	res, err := db.st.Apply(ctx, protocol.CommitSecondary(k, startTs, commitTs, writeFromLock(startTs, l)))
	if err != nil {
		return fmt.Errorf("roll forward %s to %d: %w", k, commitTs, err)
	}
	if !res.Applied {
		// A rollback record beside a committed primary would mean the
		// transaction is split; never paper over it.
		return fmt.Errorf("roll forward %s: %w: transaction %d committed at its primary but rolled back here", k, protocol.ErrCorrupt, startTs)
	}
	db.stats.RolledForward.Add(1)
	return nil
}

// rollBack rolls back k, the primary or a secondary of the transaction
// that started at startTs (a primary's lock is deleted as such: see
// protocol.Rollback).
func (db *DB) rollBack(ctx context.Context, k protocol.Key, startTs uint64, primary bool) error {
	res, err := db.st.Apply(ctx, protocol.Rollback(k, startTs, primary))
	if err != nil {
		return fmt.Errorf("roll back %s at %d: %w", k, startTs, err)
	}
	if res.Applied {
		db.stats.RolledBack.Add(1)
	}
	// Not applied: the transaction committed this cell; nothing to undo.
	return nil
}

// lockHeld reports whether k still holds the lock of the transaction that
// started at startTs.
func (db *DB) lockHeld(ctx context.Context, k protocol.Key, startTs uint64) (bool, error) {
	cells, err := db.st.ReadRow(ctx, k.Table, k.Row, []Column{k.Column}, protocol.LockSpans())
	if err != nil {
		return false, fmt.Errorf("reading the lock of %s: %w", k, err)
	}
	return len(cells) > 0 && bytes.HasPrefix(cells[0].Value, protocol.StartTsPrefix(startTs)), nil
}

// rollBackPrimary is the decision point of an abort by someone else: it
// leaves a rollback record on the primary unless the transaction committed
// there first, in which case it reports committed.
func (db *DB) rollBackPrimary(ctx context.Context, primary protocol.Key, startTs uint64) (committed bool, err error) {
	res, err := db.st.Apply(ctx, protocol.Rollback(primary, startTs, true))
	if err != nil {
		return false, fmt.Errorf("roll back primary %s at %d: %w", primary, startTs, err)
	}
	if !res.Applied {
		return true, nil
	}
	db.stats.PrimaryAborted.Add(1)
	db.stats.RolledBack.Add(1)
	return false, nil
}
