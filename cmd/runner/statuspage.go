package main

import (
	"context"
	"fmt"
	"time"

	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/pipelines/webindex/ui"
	"github.com/trickle-dev/trickle/runner"
)

// statusTimeout bounds the gathering of the status page.
const statusTimeout = 10 * time.Second

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
			out.Exports = append(out.Exports, ui.ExportStatus{Queue: es.Queue, Observer: es.Observer, Sink: exp.sink,
				Entries: es.Entries, Tombstones: es.Tombstones, Oldest: es.Oldest, LastError: lastError[es.Observer]})
		}
		return out, nil
	}
}
