package tikvengine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/tikv/client-go/v2/oracle"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/txnkv/transaction"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvcall"
)

// Transact runs fn in one TiKV transaction as o says, running it again
// as engine.Retry says.
//
// A read-write one is a client-go optimistic transaction: fn reads its
// snapshot plus its own buffered writes, which commit together when fn
// returns nil, with the notifications they leave. One that conflicts (a
// write-write conflict or a lock that would not go away) or whose
// snapshot a garbage collection passed is run again at a new snapshot
// after a backoff, up to Options.MaxAttempts; so is one whose start
// timestamp PD did not give, a few times at most. A read-only one reads
// a snapshot, at o.At if set, and refuses writes; one at a fresh snapshot
// is run again the same way.
func (db *DB) Transact(ctx context.Context, o engine.TxnOptions, fn func(context.Context, engine.Txn) error) error {
	ctx, span := db.tracer.Start(ctx, "txn", trace.WithAttributes(attribute.Bool("read_only", o.ReadOnly || o.At != 0)))
	defer span.End()
	err := db.transact(ctx, o, fn)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return err
}

func (db *DB) transact(ctx context.Context, o engine.TxnOptions, fn func(context.Context, engine.Txn) error) error {
	if o.At != 0 {
		return db.view(ctx, o.At, fn)
	}
	return db.retrying(ctx, func(ctx context.Context) error {
		if o.ReadOnly {
			return db.view(ctx, 0, fn)
		}
		return db.update(ctx, fn)
	})
}

// update makes one attempt at a read-write transaction.
func (db *DB) update(ctx context.Context, fn func(context.Context, engine.Txn) error) error {
	// The start timestamp is drawn under ctx: client-go's Begin would
	// draw it with a backoff of its own that ignores the caller's
	// deadline.
	term, err := db.leaseTerm()
	if err != nil {
		return err
	}
	bterm := db.barrierTerm()
	ts, end, err := db.start(ctx, 0)
	if err != nil {
		return noStartTimestamp(ctx, err)
	}
	defer end()
	txn, err := db.kv.Begin(tikvclient.WithStartTS(ts))
	if err != nil {
		return fail("beginning a transaction", err)
	}
	txn.GetSnapshot().SetScanBatchSize(db.opts.ScanBatchSize)
	stop := tikvcall.Watch(ctx, txn)
	tx := &Txn{db: db, r: txn, txn: txn, startTs: ts, term: term, barrierTerm: bterm, trace: traceParent(trace.SpanContextFromContext(ctx))}
	db.fence(txn, tx)
	err = fn(ctx, tx)
	tx.done = true
	if err == nil {
		err = tx.checkGuards()
	}
	if err == nil {
		// Not worth prewriting if a collection passed it already (the
		// check that counts is fence's, after the prewrites).
		err = tx.verify()
	}
	// Stopped before the commit: killing a commit half way would leave its
	// outcome to lock resolution; Commit honours ctx itself.
	stop()
	if err != nil {
		txn.Rollback()
		return err
	}
	if err := txn.Commit(ctx); err != nil {
		if tx.lapsed != nil {
			// client-go rolled the prewrites back: nothing committed.
			return tx.lapsed
		}
		err = failIn(ctx, "commit", err)
		if errors.Is(err, engine.ErrConflict) {
			db.counts.conflicts.Add(1)
		}
		return err
	}
	db.counts.committed.Add(1)
	db.predict.learn(tx.run)
	if len(tx.notified) > 0 {
		db.recent.add(slices.Collect(maps.Keys(tx.notified)), tx.trace, txn.CommitTS())
	}
	if f := db.opts.Notified; f != nil && len(tx.rows) > 0 {
		f(tx.notifiedRows())
	}
	return nil
}

// fence makes txn's commit check, once every prewrite succeeded and
// before the commit point, that no collection passed the transaction (see
// verify), leaving the check's error in tx.lapsed. TiKV does not
// compare a prewrite's start timestamp with the GC safe point: a process
// paused after its last check and before its prewrites left could
// otherwise prewrite after a collection dropped a deletion newer than its
// snapshot, which the prewrite would then not conflict with (a lost
// update). Checked after the prewrites instead, the lease held while
// every prewrite was checked for conflicts, so no collection had passed
// the transaction then; a pause after the check is harmless, as the
// transaction's locks stand in the way from then on.
//
// The check needs a step between the prewrites and the commit point,
// which async commit and one-phase commit do not have, so with a Lease
// every commit is two-phase; without one (no collection counts the
// process anyway) both stay as Options say.
func (db *DB) fence(txn *transaction.KVTxn, tx *Txn) {
	if db.opts.Lease == nil {
		txn.SetEnableAsyncCommit(!db.opts.DisableAsyncCommit)
		txn.SetEnable1PC(!db.opts.Disable1PC)
		return
	}
	txn.SetCommitTSUpperBoundCheck(func(uint64) bool {
		tx.lapsed = tx.verify()
		return tx.lapsed == nil
	})
}

// view runs fn in a read-only transaction at ts (0: a fresh timestamp).
// A snapshot of the past is registered first, then checked against the
// safe point PD holds now, and checked again once fn returned: a
// collection by another process that passed it meanwhile (one that had
// drawn its safe point before the registration counted) fails the view
// with engine.ErrSnapshotTooOld, whatever fn read, as the protocol
// engine's as-of reads do.
func (db *DB) view(ctx context.Context, ts uint64, fn func(context.Context, engine.Txn) error) error {
	term, err := db.leaseTerm()
	if err != nil {
		return err
	}
	past := ts != 0
	bterm := db.barrierTerm()
	ts, end, err := db.start(ctx, ts)
	if err != nil {
		return err
	}
	defer end()
	if past {
		if err := db.checkPast(ctx, ts); err != nil {
			return err
		}
	}
	snap, stop := db.snapshot(ctx, ts)
	defer stop()
	tx := &Txn{db: db, r: snap, startTs: ts, term: term, barrierTerm: bterm, readOnly: true}
	err = fn(ctx, tx)
	tx.done = true
	if past {
		if perr := db.checkKept(ctx, ts); perr != nil {
			return perr
		}
	}
	return err
}

// barrierTerm is the term of the process's GC barrier a transaction
// begins in (0 without one).
func (db *DB) barrierTerm() uint64 {
	if db.opts.Barrier == nil {
		return 0
	}
	return db.opts.Barrier.term()
}

// checkKept refuses a snapshot at ts that is below the safe point PD
// holds now.
func (db *DB) checkKept(ctx context.Context, ts uint64) error {
	sp, err := db.AdoptSafePoint(ctx)
	if err != nil {
		return fmt.Errorf("tikvengine: snapshot %d: checking it is still kept: %w", ts, err)
	}
	if ts < sp {
		return fmt.Errorf("tikvengine: snapshot %d: %w: below the GC safe point %d", ts, engine.ErrSnapshotTooOld, sp)
	}
	return nil
}

// checkPast refuses a snapshot of the past that TiKV no longer keeps
// (below the safe point PD holds now) or that is not past yet (above every timestamp
// PD handed out).
func (db *DB) checkPast(ctx context.Context, ts uint64) error {
	if err := db.checkKept(ctx, ts); err != nil {
		return err
	}
	opt := &oracle.Option{TxnScope: oracle.GlobalTxnScope}
	if low, err := db.kv.GetOracle().GetLowResolutionTimestamp(ctx, opt); err == nil && ts <= low {
		return nil
	}
	now, err := db.timestamp(ctx)
	if err != nil {
		return err
	}
	if ts > now {
		return fmt.Errorf("tikvengine: snapshot %d: %w: PD's timestamp is %d", ts, engine.ErrFutureSnapshot, now)
	}
	return nil
}

// traceParent is the W3C traceparent of sc, which notifications carry so
// that an observer's run joins the trace of the write that caused it; nil
// if sc is not valid.
func traceParent(sc trace.SpanContext) []byte {
	if !sc.IsValid() {
		return nil
	}
	return fmt.Appendf(make([]byte, 0, 55), "00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}
