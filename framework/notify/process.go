package notify

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/engine"
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
	e       engine.Engine
	reg     *framework.Registry
	stats   Stats
	metrics *metrics
	tracer  trace.Tracer
}

// NewProcessor returns a processor running reg's observers on db. It
// freezes reg.
func NewProcessor(db *framework.DB, reg *framework.Registry) *Processor {
	reg.Freeze()
	e := (*engine.DB)(db).Engine()
	o := e.Setup()
	p := &Processor{e: e, reg: reg, tracer: o.TracerProvider.Tracer(engine.InstrumentationName)}
	p.metrics = newMetrics(o.MeterProvider, o.WorkerID, reg, p, o.Logger)
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
	// Read what is pending first: the run's snapshot is drawn afterwards,
	// so it sees everything the notifications announce that had committed
	// by then.
	pending, err := p.e.Pending(ctx, engine.Notification(n))
	if err != nil || pending == nil {
		return OutcomeNone, err
	}
	began := time.Now()
	obs, ok := p.reg.Lookup(n.Table, n.Column)
	if !ok {
		p.stats.Unobserved.Add(1)
		err := p.e.Discard(ctx, pending)
		p.metrics.record(ctx, "", OutcomeUnobserved, err != nil, time.Since(began))
		return OutcomeUnobserved, err
	}
	ctx, span := p.startRun(ctx, &obs, n, pending)
	var runTs uint64
	var attempts int
	outcome := OutcomeRan
	err = p.e.Transact(ctx, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		attempts++
		outcome = OutcomeRan
		// Taken once the run has read: where the store chooses a
		// snapshot, the run's first read chose it.
		defer func() { runTs = tx.StartTs() }()
		changed, err := p.e.Claim(ctx, tx, obs.Name, engine.Kind(obs.Kind), pending)
		if err != nil || !changed {
			outcome = OutcomeSkipped
			return err
		}
		return obs.Fn(ctx, (*framework.Txn)(engine.NewTx(tx)), n.Row, n.Column)
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
		err = p.settle(ctx, pending, runTs)
	}
	p.metrics.record(ctx, obs.Name, outcome, err != nil, time.Since(began))
	endRun(span, outcome, attempts, err)
	if err != nil && span.SpanContext().IsValid() {
		err = &runError{err: err, sc: span.SpanContext()}
	}
	return outcome, err
}

// settle removes what the run at runTs dealt with of pending, and counts
// what it collapsed and what it left.
func (p *Processor) settle(ctx context.Context, pending *engine.Pending, runTs uint64) error {
	s, err := p.e.Settle(ctx, pending, runTs)
	p.stats.CleanupKept.Add(uint64(s.Kept))
	if s.Removed > 1 {
		p.stats.Collapsed.Add(uint64(s.Removed - 1))
	}
	return err
}
