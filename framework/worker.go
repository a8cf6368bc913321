package framework

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	noopmetric "go.opentelemetry.io/otel/metric/noop"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// Outcome says what processing a notification did.
type Outcome int

// Outcomes of Worker.Process.
const (
	// OutcomeNone: no notification was pending (someone processed it).
	OutcomeNone Outcome = iota
	// OutcomeRan: the observer ran and its transaction committed.
	OutcomeRan
	// OutcomeSkipped: nothing changed since the observer's last run (the
	// notification was a duplicate or already handled); it was removed.
	OutcomeSkipped
	// OutcomeUnobserved: no observer observes the column any more; the
	// notification was removed.
	OutcomeUnobserved
)

func (o Outcome) String() string {
	return [...]string{"none", "ran", "skipped", "unobserved"}[o]
}

// ackFamily holds each strong observer's ack column: the start timestamp of
// its last committed run, per observed column.
const ackFamily = reservedPrefix + "ack"

func ackKey(obs *Observer, n Notification) protocol.Key {
	q := obs.Name + "\x00" + protocol.NotifyColumn(n.Column).Qualifier
	return protocol.Key{Table: n.Table, Row: n.Row, Column: Column{Family: ackFamily, Qualifier: q}}
}

// WorkerStats counts what a worker did.
type WorkerStats struct {
	Runs        atomic.Uint64 // observer transactions committed
	Skipped     atomic.Uint64 // notifications with nothing new
	Failures    atomic.Uint64 // observer runs that returned an error
	Collapsed   atomic.Uint64 // extra notifications settled by a run (message collapsing)
	Unobserved  atomic.Uint64
	CleanupKept atomic.Uint64 // notifications left because their writer had not settled
}

// Worker runs the observers of a frozen registry for notifications found by
// scanners. It is safe for concurrent use.
type Worker struct {
	db      *DB
	reg     *Registry
	stats   WorkerStats
	metrics *workerMetrics
}

// NewWorker returns a worker running reg's observers on db. It freezes reg.
func NewWorker(db *DB, reg *Registry) *Worker {
	reg.Freeze()
	w := &Worker{db: db, reg: reg}
	m, err := newWorkerMetrics(db, w)
	if err != nil {
		db.opts.Logger.Warn("worker metrics unavailable", "err", err)
		m, _ = newWorkerMetrics(&DB{opts: Options{MeterProvider: noopmetric.NewMeterProvider()}}, w)
	}
	w.metrics = m
	return w
}

// Stats returns the worker's counters.
func (w *Worker) Stats() *WorkerStats { return &w.stats }

// Registry returns the worker's observers.
func (w *Worker) Registry() *Registry { return w.reg }

// DB returns the database the worker runs on.
func (w *Worker) DB() *DB { return w.db }

// Process runs the observer of n's column, in its own transaction, if
// anything changed since the observer's last run, and then removes the
// notifications that run settled. An error from the observer (or a conflict
// that outlasted Update's retries) is returned; the notification stays and
// will be found again.
func (w *Worker) Process(ctx context.Context, n Notification) (Outcome, error) {
	db := w.db
	notifyCol := protocol.NotifyColumn(n.Column)
	// Read the notifications first: the run's snapshot is drawn afterwards,
	// so it sees everything they announce that had committed by then.
	versions, err := db.st.ReadRow(ctx, n.Table, n.Row, []Column{notifyCol}, nil)
	if err != nil {
		return OutcomeNone, fmt.Errorf("framework: process %s: %w", n, err)
	}
	if len(versions) == 0 {
		return OutcomeNone, nil
	}
	began := time.Now()
	obs, ok := w.reg.Lookup(n.Table, n.Column)
	if !ok {
		w.stats.Unobserved.Add(1)
		err := w.removeNotifications(ctx, n, versions)
		w.metrics.record(ctx, "", OutcomeUnobserved, err != nil, time.Since(began))
		return OutcomeUnobserved, err
	}
	ctx, span := w.startRun(ctx, obs, n, writerTraces(versions), versions)
	var runTs uint64
	var attempts int
	outcome := OutcomeRan
	err = db.Update(ctx, func(ctx context.Context, tx *Txn) error {
		attempts++
		runTs, outcome = tx.startTs, OutcomeRan
		if obs.Kind == Strong {
			changed, err := w.claim(ctx, tx, obs, n)
			if err != nil || !changed {
				outcome = OutcomeSkipped
				return err
			}
		}
		return obs.Fn(ctx, tx, n.Row, n.Column)
	})
	if err != nil {
		w.stats.Failures.Add(1)
		err = fmt.Errorf("observer %s on %s: %w", obs.Name, n, err)
	} else {
		if outcome == OutcomeRan {
			w.stats.Runs.Add(1)
		} else {
			w.stats.Skipped.Add(1)
		}
		err = w.settle(ctx, n, versions, runTs)
	}
	w.metrics.record(ctx, obs.Name, outcome, err != nil, time.Since(began))
	endRun(span, outcome, attempts, err)
	if err != nil && span.SpanContext().IsValid() {
		err = &runError{err: err, sc: span.SpanContext()}
	}
	return outcome, err
}

// writerTraces returns the trace context each notification version
// carries (nil where none); undecodable values are left to settle.
func writerTraces(versions []store.Cell) [][]byte {
	var out [][]byte
	for i, v := range versions {
		nv, err := protocol.DecodeNotify(v.Value)
		if err != nil || len(nv.Trace) == 0 {
			continue
		}
		if out == nil {
			out = make([][]byte, len(versions))
		}
		out[i] = nv.Trace
	}
	return out
}

// claim decides whether a strong observer must run: only if the observed
// cell was written after its last run (the ack). It then sets the ack to
// this run's start timestamp, so that of two concurrent runs for the same
// change at most one commits: they collide on the ack.
func (w *Worker) claim(ctx context.Context, tx *Txn, obs *Observer, n Notification) (bool, error) {
	ak := ackKey(obs, n)
	var ack uint64
	v, err := w.db.readCell(ctx, tx.startTs, ak)
	switch {
	case err == nil && len(v) == 8:
		ack = binary.BigEndian.Uint64(v)
	case err == nil:
		return false, fmt.Errorf("framework: ack of %s: %w", n, protocol.ErrCorrupt)
	case !errors.Is(err, ErrNotFound):
		return false, err
	}
	_, changedAt, err := w.db.readWrite(ctx, tx.startTs, n.key())
	if err != nil {
		return false, err
	}
	if changedAt <= ack {
		return false, nil
	}
	tx.setRaw(ak, protocol.OpPut, binary.BigEndian.AppendUint64(nil, tx.startTs))
	return true, nil
}

// settle removes the notification versions that the run at runTs has dealt
// with: those whose write it could see or that will never happen. A write
// that committed while the observer ran keeps its notification, so the next
// run sees it.
func (w *Worker) settle(ctx context.Context, n Notification, versions []store.Cell, runTs uint64) error {
	var done []store.Cell
	for _, v := range versions {
		if v.Ts > runTs {
			w.stats.CleanupKept.Add(1)
			continue
		}
		nv, err := protocol.DecodeNotify(v.Value)
		if err != nil {
			return fmt.Errorf("framework: notification %s: %w", n, err)
		}
		if nv.HasWriter {
			st, err := w.db.txnStatus(ctx, nv.Primary, v.Ts)
			if err != nil {
				return err
			}
			// Below the safe point the writer's records may be collected;
			// it cannot still be running.
			gone := st.State == protocol.StateMissing && v.Ts < w.db.SafePoint()
			if !protocol.SettleNotification(v.Ts, runTs, st) && !gone {
				w.stats.CleanupKept.Add(1)
				continue
			}
		}
		done = append(done, v)
	}
	if len(done) > 1 {
		w.stats.Collapsed.Add(uint64(len(done) - 1))
	}
	return w.removeNotifications(ctx, n, done)
}

// removeNotifications deletes exactly these versions of the notify cell; a
// notification written meanwhile has another version and stays.
func (w *Worker) removeNotifications(ctx context.Context, n Notification, versions []store.Cell) error {
	if len(versions) == 0 {
		return nil
	}
	muts := make([]store.Mutation, len(versions))
	for i, v := range versions {
		muts[i] = store.Mutation{Column: v.Column, Ts: v.Ts, Delete: true}
	}
	_, err := w.db.st.Apply(ctx, &store.RowTxn{Table: n.Table, Row: n.Row, Mutations: muts, NoSync: true})
	if err != nil {
		return fmt.Errorf("framework: remove notification %s: %w", n, err)
	}
	return nil
}
