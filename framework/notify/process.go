package notify

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/percolator"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// Outcome says what processing a notification did.
type Outcome int

// Outcomes of Processor.Process.
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

// ackKey is the cell holding a strong observer's ack for n's column: the
// start timestamp of its last committed run.
func ackKey(obs *framework.Observer, n Notification) protocol.Key {
	q := obs.Name + "\x00" + protocol.NotifyColumn(n.Column).Qualifier
	return protocol.Key{Table: n.Table, Row: n.Row, Column: Column{Family: protocol.AckFamily, Qualifier: q}}
}

// Stats counts what a Processor did.
type Stats struct {
	Runs        atomic.Uint64 // observer transactions committed
	Skipped     atomic.Uint64 // notifications with nothing new
	Failures    atomic.Uint64 // observer runs that returned an error
	Collapsed   atomic.Uint64 // extra notifications settled by a run (message collapsing)
	Unobserved  atomic.Uint64
	CleanupKept atomic.Uint64 // notifications left because their writer had not settled
}

// Processor runs the observers of a frozen registry for the notifications
// scanners find. It is safe for concurrent use.
type Processor struct {
	db      *percolator.DB
	reg     *framework.Registry
	stats   Stats
	metrics *metrics
	tracer  trace.Tracer
}

// NewProcessor returns a processor running reg's observers on db. It
// freezes reg.
func NewProcessor(fdb *framework.DB, reg *framework.Registry) *Processor {
	reg.Freeze()
	db := (*percolator.DB)(fdb)
	opts := db.Options()
	p := &Processor{db: db, reg: reg, tracer: opts.TracerProvider.Tracer(percolator.InstrumentationName)}
	p.metrics = newMetrics(opts.MeterProvider, opts.WorkerID, reg, p, opts.Logger)
	return p
}

// Stats returns the processor's counters.
func (p *Processor) Stats() *Stats { return &p.stats }

// Registry returns the observers the processor runs.
func (p *Processor) Registry() *framework.Registry { return p.reg }

// Process runs the observer of n's column, in its own transaction, if
// anything changed since the observer's last run, and then removes the
// notifications that run settled. An error from the observer (or a
// conflict that outlasted Update's retries) is returned; the notification
// stays and will be found again.
func (p *Processor) Process(ctx context.Context, n Notification) (Outcome, error) {
	notifyCol := protocol.NotifyColumn(n.Column)
	// The safe point before the run: a writer that started below it can
	// no longer commit (the store refuses it), so its notification is
	// settled if its primary says nothing. One adopted after the run may
	// be above a writer that committed after the run's snapshot, whose
	// primary's records a collection removed.
	before := p.db.SafePoint()
	// Read the notifications first: the run's snapshot is drawn afterwards,
	// so it sees everything they announce that had committed by then.
	versions, err := p.db.Store().ReadRow(ctx, n.Table, n.Row, []Column{notifyCol}, nil)
	if err != nil {
		return OutcomeNone, fmt.Errorf("notify: process %s: %w", n, err)
	}
	if len(versions) == 0 {
		return OutcomeNone, nil
	}
	began := time.Now()
	obs, ok := p.reg.Lookup(n.Table, n.Column)
	if !ok {
		p.stats.Unobserved.Add(1)
		err := p.remove(ctx, n, versions)
		p.metrics.record(ctx, "", OutcomeUnobserved, err != nil, time.Since(began))
		return OutcomeUnobserved, err
	}
	ctx, span := p.startRun(ctx, &obs, n, writerTraces(versions), versions)
	var runTs uint64
	var attempts int
	outcome := OutcomeRan
	err = p.db.Update(ctx, func(ctx context.Context, tx *percolator.Txn) error {
		attempts++
		outcome = OutcomeRan
		// Taken once the run has read: where the store chooses a
		// snapshot, the run's first read chose it.
		defer func() { runTs = tx.StartTs() }()
		if obs.Kind == framework.Strong {
			changed, err := p.claim(ctx, tx, &obs, n)
			if err != nil || !changed {
				outcome = OutcomeSkipped
				return err
			}
		}
		return obs.Fn(ctx, (*framework.Txn)(tx), n.Row, n.Column)
	})
	if err != nil {
		p.stats.Failures.Add(1)
		err = fmt.Errorf("observer %s on %s: %w", obs.Name, n, err)
	} else {
		if outcome == OutcomeRan {
			p.stats.Runs.Add(1)
		} else {
			p.stats.Skipped.Add(1)
		}
		err = p.settle(ctx, n, versions, runTs, before)
	}
	p.metrics.record(ctx, obs.Name, outcome, err != nil, time.Since(began))
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
func (p *Processor) claim(ctx context.Context, tx *percolator.Txn, obs *framework.Observer, n Notification) (bool, error) {
	ak := ackKey(obs, n)
	// One read for both cells, which as the run's first read also
	// chooses its snapshot where the store can.
	ws, err := tx.ReadWrites(ctx, []protocol.Key{ak, n.key()})
	if err != nil {
		return false, err
	}
	var ack uint64
	v, err := tx.WriteValue(ctx, ak, ws[0].Write)
	switch {
	case err == nil && len(v) == 8:
		ack = binary.BigEndian.Uint64(v)
	case err == nil:
		return false, fmt.Errorf("notify: ack of %s: %w", n, protocol.ErrCorrupt)
	case !errors.Is(err, percolator.ErrNotFound):
		return false, err
	}
	if changedAt := ws[1].CommitTs; changedAt <= ack {
		return false, nil
	}
	tx.SetRaw(ak, binary.BigEndian.AppendUint64(nil, tx.StartTs()))
	return true, nil
}

// settle removes the notification versions that the run at runTs has dealt
// with: those whose write it could see or that will never happen. A write
// that committed while the observer ran keeps its notification, so the next
// run sees it. sp is the safe point from before the run.
func (p *Processor) settle(ctx context.Context, n Notification, versions []store.Cell, runTs, sp uint64) error {
	var done []store.Cell
	for _, v := range versions {
		if v.Ts > runTs {
			p.stats.CleanupKept.Add(1)
			continue
		}
		nv, err := protocol.DecodeNotify(v.Value)
		if err != nil {
			return fmt.Errorf("notify: notification %s: %w", n, err)
		}
		if nv.HasWriter {
			st, err := p.db.TxnStatus(ctx, nv.Primary, v.Ts)
			if err != nil {
				return err
			}
			// Below the safe point from before the run the writer's
			// records may be collected, and it could not commit after
			// that safe point was persisted: it is settled or will never
			// be. (Not the safe point now, which may have passed a
			// writer that committed after the run's snapshot.)
			gone := st.State == protocol.StateMissing && v.Ts < sp
			if !protocol.SettleNotification(v.Ts, runTs, st) && !gone {
				p.stats.CleanupKept.Add(1)
				continue
			}
		}
		done = append(done, v)
	}
	if len(done) > 1 {
		p.stats.Collapsed.Add(uint64(len(done) - 1))
	}
	return p.remove(ctx, n, done)
}

// remove deletes exactly these versions of the notify cell; a notification
// written meanwhile has another version and stays.
//
// The deletes are single deletes (store.Mutation.SingleDelete): a notify
// version is its writer's start timestamp (or a fresh one), written once,
// so the write and its delete vanish together at the next flush instead of
// leaving a tombstone in the notify group for every scan to step over until
// compaction. Only a retried unconditional write (a weak notification whose
// answer was lost) can write a version twice; the single delete may then
// let the first write come back, which costs one more settling: a strong
// notification is checked against its observer's ack and dropped without
// a run, a weak one may run its observer once more, which weak observers
// tolerate by contract.
func (p *Processor) remove(ctx context.Context, n Notification, versions []store.Cell) error {
	if len(versions) == 0 {
		return nil
	}
	muts := make([]store.Mutation, len(versions))
	for i, v := range versions {
		muts[i] = store.Mutation{Column: v.Column, Ts: v.Ts, Delete: true, SingleDelete: true}
	}
	_, err := p.db.Store().Apply(ctx, &store.RowTxn{Table: n.Table, Row: n.Row, Mutations: muts, NoSync: true})
	if err != nil {
		return fmt.Errorf("notify: remove notification %s: %w", n, err)
	}
	return nil
}
