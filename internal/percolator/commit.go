package percolator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// CommitStep names a point of the commit protocol, for fault injection.
type CommitStep int

// Commit steps, in protocol order. A fault at a step means "the process died
// right after this step".
const (
	// StepPrimaryPrewritten: the primary is locked, no secondary is.
	StepPrimaryPrewritten CommitStep = iota + 1
	// StepSecondaryPrewritten: after each secondary's prewrite.
	StepSecondaryPrewritten
	// StepPrewritten: every cell is locked; the commit timestamp is next.
	StepPrewritten
	// StepCommitted: the primary's write record is durable (the commit
	// point); the secondaries are still locked.
	StepCommitted
	// StepSecondaryCommitted: after each secondary's commit.
	StepSecondaryCommitted
	// StepOnePhaseCommitted: every cell is written as committed in one
	// atomic store write (a one-phase commit, which has no other step).
	StepOnePhaseCommitted
)

func (s CommitStep) String() string {
	switch s {
	case StepPrimaryPrewritten:
		return "primary-prewritten"
	case StepSecondaryPrewritten:
		return "secondary-prewritten"
	case StepPrewritten:
		return "prewritten"
	case StepCommitted:
		return "committed"
	case StepSecondaryCommitted:
		return "secondary-committed"
	case StepOnePhaseCommitted:
		return "one-phase-committed"
	}
	return fmt.Sprintf("step(%d)", int(s))
}

func (tx *Txn) fault(step CommitStep) error {
	if f := tx.db.opts.Faults; f != nil {
		if err := f(step, tx.startTs); err != nil {
			return &CrashError{Step: step, StartTs: tx.startTs, Err: err}
		}
	}
	return nil
}

func (tx *Txn) commit(ctx context.Context) error {
	if tx.done {
		return ErrTxnDone
	}
	defer tx.discard()
	if tx.unpinned != nil {
		return tx.unpinned
	}
	ctx = tx.withSpan(ctx)
	var err error
	switch {
	case len(tx.writes) == 0:
		err = tx.commitWeakOnly(ctx)
	default:
		// A transaction that wrote without reading has no snapshot yet.
		if err = tx.pin(ctx); err == nil {
			if err = tx.checkSnapshot(); err == nil {
				err = tx.commitWrites(ctx)
			}
		}
	}
	if errors.Is(err, store.ErrSnapshotTooOld) && !errors.Is(err, ErrSnapshotTooOld) {
		// The store refused a prewrite, a one-phase commit or the commit
		// point: nothing of the transaction commits.
		err = fmt.Errorf("%w: %w", ErrSnapshotTooOld, err)
	}
	switch {
	case err == nil:
		tx.outcome = txnCommitted
		if len(tx.writes) > 0 {
			tx.db.stats.Committed.Add(1)
		}
		if f := tx.db.opts.Notified; f != nil && (len(tx.weak) > 0 || tx.strong.Load()) {
			f(tx.notifiedRows())
		}
	case errors.Is(err, ErrConflict):
		tx.outcome = txnConflict
		tx.db.stats.Conflicts.Add(1)
	case errors.Is(err, ErrCrashed):
		tx.outcome = txnCrashed
	default:
		tx.outcome = txnAborted
		tx.db.stats.Aborted.Add(1)
		if tx.prewrote {
			// Its locks may be left (the store may have stopped answering
			// during the commit or its cleanup): this DB's own resolvers
			// need not wait for their TTL.
			tx.db.giveUp(tx.startTs)
		}
	}
	if err != nil && tx.span.IsRecording() {
		tx.span.RecordError(err)
	}
	return err
}

// twoPhaseCommit runs Percolator's commit: prewrite the primary, then the
// secondaries, take the commit point at the primary, then commit the
// secondaries. The fault hooks between the steps let tests crash the
// transaction at each.
func (tx *Txn) twoPhaseCommit(ctx context.Context) error {
	tx.prewrote = true
	ms := tx.sortedWrites()
	locks := tx.lockRecords(ms)
	pk := ms[0].key
	tx.traceCtxFor()
	traced := tx.span.IsRecording()
	if traced {
		tx.span.SetAttributes(attrPrimary.String(pk.String()))
	}

	// Weak notifications on a row the transaction writes ride in that
	// row's prewrite; the rest are written after the prewrites.
	extra, apart := tx.weakByWrite(ms, pk)

	// Phase 1: prewrite the primary, then the secondaries.
	if err := tx.prewrite(ctx, tx.prewriteTxn(ms, locks, []int{0}, extra)); err != nil {
		return err
	}
	if traced {
		tx.span.AddEvent("primary prewritten")
	}
	hb := tx.startHeartbeat(pk, locks[0])
	defer hb.stop()
	if err := tx.fault(StepPrimaryPrewritten); err != nil {
		return err
	}
	// The secondaries of one row are prewritten, and later committed, in
	// one row transaction.
	rows := rowGroups(ms, 1)
	if err := tx.prewriteRows(ctx, ms, locks, rows, extra, StepSecondaryPrewritten); err != nil {
		if !errors.Is(err, ErrCrashed) {
			tx.abort(ctx, ms)
		}
		return err
	}
	if err := tx.writeWeak(ctx, pk, apart); err != nil {
		tx.abort(ctx, ms)
		return err
	}
	if traced {
		tx.span.AddEvent("prewritten", trace.WithAttributes(attribute.Int("trickle.txn.secondaries", len(ms)-1), attribute.Int("trickle.txn.weak_notifications", len(tx.weak))))
	}
	if err := tx.fault(StepPrewritten); err != nil {
		return err
	}

	// Phase 2: the commit point, then the secondaries.
	commitTs, err := tx.takeCommitPoint(ctx, ms, locks, hb)
	if err != nil {
		return err
	}
	tx.committedAt(commitTs)
	if traced {
		tx.span.AddEvent("commit point", trace.WithAttributes(attrCommitTs.Int64(int64(commitTs))))
	}
	if err := tx.fault(StepCommitted); err != nil {
		return err
	}
	return tx.finishSecondaries(ctx, ms, locks, rows, commitTs)
}

// lockRecords builds the lock each of ms is prewritten with, all pointing
// at the primary ms[0], whose lock counts the secondaries.
func (tx *Txn) lockRecords(ms []*mutation) []*protocol.Lock {
	locks := make([]*protocol.Lock, len(ms))
	lockRecs := make([]protocol.Lock, len(ms)) // one allocation for all
	ttl := tx.ttlMs()
	for i, m := range ms {
		lockRecs[i] = tx.lockFor(m, ms[0].key, ttl)
		locks[i] = &lockRecs[i]
	}
	locks[0].Secondaries = len(ms) - 1
	return locks
}

// takeCommitPoint commits the primary and returns the commit timestamp.
// Every error says whether the transaction committed: refused or
// conflicting, it is rolled back; with the primary's outcome unknown
// (ErrCommitUnknown) nothing is rolled back, since readers resolve from
// the primary. A primary already committed by an earlier attempt of this
// transaction is success, at that attempt's timestamp.
func (tx *Txn) takeCommitPoint(ctx context.Context, ms []*mutation, locks []*protocol.Lock, hb *heartbeat) (uint64, error) {
	pk := ms[0].key
	commitTs, res, tsErr, err := tx.commitPoint(ctx, pk, locks[0], hb)
	if errors.Is(err, store.ErrSnapshotTooOld) {
		// Refused before it was applied: a collection passed the
		// transaction, which must not commit (and will not: the
		// collection rolls its locks back too).
		tx.abort(ctx, ms)
		return 0, fmt.Errorf("framework: commit point of %d at %s: %w", tx.startTs, pk, err)
	}
	if tsErr != nil {
		tx.abort(ctx, ms)
		if errors.Is(tsErr, store.ErrNoTimestamp) {
			return 0, fmt.Errorf("framework: commit timestamp: %w", tsErr)
		}
		// The oracle's error: the transaction did not commit either.
		return 0, fmt.Errorf("framework: commit timestamp: %w: %w", store.ErrNoTimestamp, tsErr)
	}
	if err != nil {
		return 0, fmt.Errorf("framework: commit point of %d at %s: %w: %w", tx.startTs, pk, ErrCommitUnknown, err)
	}
	if res.Applied {
		return commitTs, nil
	}
	st, serr := tx.db.txnStatus(ctx, pk, tx.startTs)
	if serr != nil {
		return 0, fmt.Errorf("framework: commit point of %d: %w", tx.startTs, serr)
	}
	if st.State != protocol.StateCommitted {
		tx.abort(ctx, ms)
		return 0, &ConflictError{Kind: ErrAborted, Table: pk.Table, Row: pk.Row, Column: pk.Column, StartTs: tx.startTs}
	}
	return st.CommitTs, nil // an earlier attempt of ours committed
}

// finishSecondaries commits the secondaries after the commit point. The
// transaction has committed whatever happens here: a failure only leaves
// locks that readers roll forward, so it is logged, not returned (except
// an injected crash, which tests need to see).
func (tx *Txn) finishSecondaries(ctx context.Context, ms []*mutation, locks []*protocol.Lock, rows [][]int, commitTs uint64) error {
	if len(rows) == 0 {
		return nil
	}
	err := tx.commitSecondaries(ctx, ms, locks, rows, commitTs)
	switch {
	case errors.Is(err, ErrCrashed):
		return err
	case err != nil:
		tx.db.opts.Logger.WarnContext(ctx, "committing secondaries; readers will roll them forward", "start_ts", tx.startTs, "err", err)
		if tx.span.IsRecording() {
			tx.span.AddEvent("secondaries left to roll forward", trace.WithAttributes(attribute.String("error", err.Error())))
		}
	case tx.span.IsRecording():
		tx.span.AddEvent("secondaries committed")
	}
	return nil
}

// commitSecondaries commits the cells of each row group (rows[i] indexes
// ms, all in one row) after the commit point, in one row transaction per
// row, the rows going to the store together (see applyRows). The fault
// hook for StepSecondaryCommitted runs after each row's commit.
func (tx *Txn) commitSecondaries(ctx context.Context, ms []*mutation, locks []*protocol.Lock, rows [][]int, commitTs uint64) error {
	cells := make([][]protocol.CommitCell, len(rows))
	txns := make([]*store.RowTxn, len(rows))
	n := 0
	for _, idx := range rows {
		n += len(idx)
	}
	// One allocation each for all the rows' cells and write records.
	all, writes := make([]protocol.CommitCell, 0, n), make([]protocol.Write, n)
	for i, idx := range rows {
		start := len(all)
		for _, m := range idx {
			w := &writes[len(all)]
			*w = *writeFromLock(tx.startTs, locks[m])
			all = append(all, protocol.CommitCell{Key: ms[m].key, Write: w})
		}
		cells[i] = all[start:len(all):len(all)]
		txns[i] = protocol.CommitSecondaryRowLocked(cells[i], tx.startTs, commitTs)
	}
	// Rows whose lock was not found as ours (rolled forward by a reader
	// meanwhile) are committed again on the rollback record's evidence.
	var again []int
	var mu sync.Mutex
	_, err := tx.db.applyRows(ctx, "commit secondaries", txns, func(i int, res store.RowResult) error {
		if !res.Applied {
			mu.Lock()
			again = append(again, i)
			mu.Unlock()
			return nil
		}
		return tx.fault(StepSecondaryCommitted)
	})
	if err != nil || len(again) == 0 {
		return err
	}
	slices.Sort(again)
	retry := make([]*store.RowTxn, len(again))
	for j, i := range again {
		retry[j] = protocol.CommitSecondaryRow(cells[i], tx.startTs, commitTs)
	}
	_, err = tx.db.applyRows(ctx, "commit secondaries", retry, func(j int, res store.RowResult) error {
		if !res.Applied {
			k := ms[rows[again[j]][res.FailedCheck]].key
			return fmt.Errorf("commit secondary %s: %w: rolled back after the primary committed", k, protocol.ErrCorrupt)
		}
		return tx.fault(StepSecondaryCommitted)
	})
	return err
}

// abort rolls back everything this transaction may have prewritten, primary
// first: once the primary carries a rollback record the transaction can never
// commit, whatever happens to the cleanup of the rest.
func (tx *Txn) abort(ctx context.Context, ms []*mutation) {
	ctx = context.WithoutCancel(ctx)
	if _, err := tx.db.rollBackPrimary(ctx, ms[0].key, tx.startTs); err != nil {
		tx.db.opts.Logger.WarnContext(ctx, "rolling back primary after failed commit; readers will resolve it", "start_ts", tx.startTs, "err", err)
		return
	}
	for _, m := range ms[1:] {
		if err := tx.db.rollBack(ctx, m.key, tx.startTs, false); err != nil {
			tx.db.opts.Logger.WarnContext(ctx, "cleanup after failed commit; readers will roll back", "start_ts", tx.startTs, "key", m.key.String(), "err", err)
			return
		}
	}
}

// heartbeat refreshes the primary lock's TTL while a commit is in progress.
// It costs nothing for commits shorter than one interval: a timer, no
// goroutine.
type heartbeat struct {
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	beating sync.WaitGroup
}

func (tx *Txn) startHeartbeat(pk protocol.Key, l *protocol.Lock) *heartbeat {
	hb := &heartbeat{}
	interval := tx.db.opts.HeartbeatInterval
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.timer = time.AfterFunc(interval, func() {
		hb.mu.Lock()
		if hb.stopped {
			hb.mu.Unlock()
			return
		}
		hb.beating.Add(1)
		hb.mu.Unlock()
		defer hb.beating.Done()
		refreshed := *l
		refreshed.TTLMs = tx.ttlMs()
		res, err := tx.db.st.Apply(context.Background(), protocol.Heartbeat(pk, &refreshed))
		if err != nil || !res.Applied {
			return // gone: committed, rolled back, or the store is failing
		}
		hb.mu.Lock()
		defer hb.mu.Unlock()
		if !hb.stopped {
			hb.timer.Reset(interval)
		}
	})
	return hb
}

// stop ends the heartbeat and waits for a beat in flight.
func (hb *heartbeat) stop() {
	hb.mu.Lock()
	hb.stopped = true
	hb.timer.Stop()
	hb.mu.Unlock()
	hb.beating.Wait()
}

// commitPoint applies the commit point of the transaction whose primary
// is pk with lock l, at a commit timestamp drawn by the store if it can,
// else by the oracle first. A failure to draw the timestamp, by the
// oracle or by the store (store.ErrNoTimestamp), is returned as tsErr:
// nothing was applied. One of the store is returned as err: then the
// outcome is unknown. hb, the primary's heartbeat, is stopped before the
// commit point is sent, so that it cannot write the lock back after it.
func (tx *Txn) commitPoint(ctx context.Context, pk protocol.Key, l *protocol.Lock, hb *heartbeat) (commitTs uint64, res store.RowResult, tsErr, err error) {
	db := tx.db
	w := writeFromLock(tx.startTs, l)
	if db.applyNow != nil && db.chooses() {
		hb.stop()
		commitTs, res, err = db.applyNow.ApplyNow(ctx, protocol.CommitPrimary(pk, tx.startTs, 0, w), protocol.CommitPrimaryNow)
		if errors.Is(err, store.ErrNoTimestamp) {
			return 0, res, err, nil // nothing applied: abort
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return commitTs, res, nil, err
		}
	}
	if commitTs, tsErr = db.or.Timestamp(ctx); tsErr != nil {
		return 0, res, tsErr, nil
	}
	hb.stop()
	res, err = db.st.Apply(ctx, protocol.CommitPrimary(pk, tx.startTs, commitTs, w))
	return commitTs, res, nil, err
}
