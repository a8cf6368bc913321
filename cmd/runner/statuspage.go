package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/pipelines/webindex/ui"
	"github.com/trickle-dev/trickle/runner"
)

// statusTimeout bounds the gathering of the status page.
const statusTimeout = 10 * time.Second

// statusSampleEvery is how often the status page's charts take a sample:
// 240 points an hour, each a status gathering (a scan of the pending
// notifications' counts), cheap beside the work it watches.
const statusSampleEvery = 15 * time.Second

// sampleStatus adds a sample of the deployment's status (gathered by
// status) and of the runner's counters (stats) to h every interval, until
// ctx ends. Gathering reads every pending notification, so with a long
// backlog it costs more: the next sample waits at least sampleShare times
// what the last gathering took, which keeps sampling under a twentieth of
// the time whatever the backlog. A gathering that fails skips its sample
// (logged at debug level): the chart joins the gap's neighbours, and the
// status page itself says what failed.
func sampleStatus(ctx context.Context, status ui.StatusFunc, stats func() runner.Stats, h *ui.History, every time.Duration, log *slog.Logger) {
	for {
		began := time.Now()
		st, err := status(ctx)
		if err == nil {
			h.Add(statusSample(st, stats()))
		} else if ctx.Err() == nil {
			log.Debug("status sample", "err", err)
		}
		t := time.NewTimer(nextSample(every, time.Since(began)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// sampleShare bounds the share of time status sampling takes: the wait
// after a gathering is at least this many times its duration.
const sampleShare = 20

// nextSample is how long to wait for the next sample after a gathering
// that took took: the interval, or longer after a slow one.
func nextSample(every, took time.Duration) time.Duration {
	return max(every, sampleShare*took)
}

// statusSample is the sample of st and the runner's counters s.
func statusSample(st *ui.Status, s runner.Stats) ui.Sample {
	out := ui.Sample{At: st.Taken, Committed: s.Committed, Runs: s.Runs, Conflicts: s.Conflicts}
	for _, o := range st.Observers {
		out.Observers = append(out.Observers, ui.ObserverSample{Name: o.Name, Pending: o.Pending, Lag: o.Lag})
	}
	return out
}

// exporting is an export queue and where its sink sends the entries.
type exporting struct {
	queue *export.Queue
	sink  string
}

// statusPage gathers the UI's status page: the deployment's status
// (runner.GetStatus) and, when the web index exports (exp not nil), its
// export queue.
func statusPage(r *runner.Runner, exp *exporting) ui.StatusFunc {
	return func(ctx context.Context) (*ui.Status, error) {
		ctx, cancel := context.WithTimeout(ctx, statusTimeout)
		defer cancel()
		s, err := runner.GetStatus(ctx, r.Node())
		if err != nil {
			return nil, fmt.Errorf("gathering the status: %w", err)
		}
		out := &ui.Status{Taken: s.Taken,
			Oracle: fmt.Sprintf("The oracle's last timestamp: %d (%s).", s.OracleCurrent, oracle.Physical(s.OracleCurrent).UTC().Format(time.RFC3339))}
		failing := s.Failures()
		for _, l := range s.Observers {
			o := ui.ObserverStatus{Name: l.Observer, Kind: l.Kind.String(), Table: l.Table, Pending: l.Pending, Writes: l.Writes,
				Failing: failing[l.Observer], Lag: l.Age(s.Taken).Round(time.Millisecond)}
			if o.Name == "" {
				o.Name, o.Kind = "(no observer any more)", "–"
			}
			out.Observers = append(out.Observers, o)
		}
		lastError := map[string]string{}
		for _, f := range s.Failing {
			out.Failures = append(out.Failures, ui.FailureStatus{Observer: f.Observer, Cell: f.String(), LastError: f.LastError,
				Worker: f.Worker, Attempts: f.Attempts, LastAt: f.LastAt, NextRetry: f.NextRetry})
			lastError[f.Observer] = f.LastError
		}
		for _, w := range s.Workers {
			role := "writes"
			if w.Scans {
				role = "runs observers"
			}
			out.Workers = append(out.Workers, ui.WorkerStatus{ID: w.ID, Info: w.Info, Role: role, Refreshed: time.Since(w.LastRefresh).Round(time.Millisecond)})
		}
		if exp != nil {
			es, err := exp.queue.Status(ctx, r.DB())
			if err != nil {
				return nil, fmt.Errorf("reading export queue %s: %w", exp.queue.Name(), err)
			}
			e := ui.ExportStatus{Queue: es.Queue, Observer: es.Observer, Sink: exp.sink,
				Entries: es.Entries, Tombstones: es.Tombstones, Oldest: es.Oldest, LastError: lastError[es.Observer]}
			out.Exports = append(out.Exports, e)
			queueLag(out.Observers, e, out.Taken)
		}
		return out, nil
	}
}

// queueLag makes the lag of an export queue's observer the age of the
// queue's oldest waiting entry when that is longer: the observer's own
// notification is rewritten by every drain that leaves entries behind, so
// its age measures the last drain, not how long entries have waited.
func queueLag(observers []ui.ObserverStatus, e ui.ExportStatus, now time.Time) {
	for i := range observers {
		if observers[i].Name == e.Observer && e.Entries > 0 {
			observers[i].Lag = max(observers[i].Lag, e.Age(now))
		}
	}
}
