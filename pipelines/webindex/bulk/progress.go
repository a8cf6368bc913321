package bulk

import (
	"log/slog"
	"time"
)

// bulkProgressEvery is how often a long bulk load logs its progress.
const bulkProgressEvery = 10 * time.Second

// bulkProgress logs where a bulk computation is: its phase, how far
// through it, and when the phase should end at the rate so far.
type bulkProgress struct {
	log                *slog.Logger
	began, phaseBegan  time.Time
	last               time.Time
	phase              string
	step, steps        int
	done, total, since int64
}

// newBulkProgress logs a computation of steps phases on log.
func newBulkProgress(log *slog.Logger, steps int) *bulkProgress {
	now := time.Now()
	return &bulkProgress{log: log, began: now, last: now, steps: steps}
}

// start begins a phase with total units of work (0: unknown).
func (p *bulkProgress) start(phase string, total int64) {
	if p.phase != "" {
		p.log.Debug("bulk load: phase done", "phase", p.phase, "took", time.Since(p.phaseBegan).Round(time.Millisecond))
	}
	p.step++
	p.phase, p.total, p.done, p.since = phase, total, 0, 0
	p.phaseBegan = time.Now()
	p.log.Info("bulk load: "+phase, "phase", p.step, "of", p.steps, "items", total, "elapsed", time.Since(p.began).Round(time.Second))
}

// add counts n units of work done, and logs every bulkProgressEvery.
func (p *bulkProgress) add(n int64) {
	p.done += n
	if p.since += n; p.since < 4096 {
		return
	}
	p.since = 0
	now := time.Now()
	if now.Sub(p.last) < bulkProgressEvery {
		return
	}
	p.last = now
	args := []any{"phase", p.step, "of", p.steps, "done", p.done, "elapsed", now.Sub(p.began).Round(time.Second)}
	if p.total > 0 && p.done > 0 {
		spent := now.Sub(p.phaseBegan)
		left := time.Duration(float64(spent) * float64(max(p.total-p.done, 0)) / float64(p.done))
		args = append(args, "total", p.total, "percent", 100*p.done/p.total, "phase_eta", left.Round(time.Second))
	}
	p.log.Info("bulk load: "+p.phase, args...)
}
