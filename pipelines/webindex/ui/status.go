package ui

import (
	"context"
	"net/http"
	"time"
)

// Status is what the status page shows of the deployment serving the
// index: each observer's backlog and lag, the notifications that keep
// failing with their last error, the live workers, and the export
// queues. The process that serves the UI gathers it (cmd/runner from
// runner.GetStatus and its export queue) with a StatusFunc.
type Status struct {
	// Taken is when the status was gathered.
	Taken time.Time
	// Oracle describes the timestamp oracle's position.
	Oracle    string
	Observers []ObserverStatus
	Failures  []FailureStatus
	Workers   []WorkerStatus
	Exports   []ExportStatus
}

// ObserverStatus is one observer's row: the cells whose notification
// waits for it (and the writes they announce), how long it has owed its
// oldest pending run, and how many of its notifications keep failing.
type ObserverStatus struct {
	Name, Kind, Table        string
	Pending, Writes, Failing int
	Lag                      time.Duration
}

// FailureStatus is a notification whose observer keeps failing.
type FailureStatus struct {
	Observer, Cell, LastError, Worker string
	Attempts                          int
	LastAt, NextRetry                 time.Time
}

// WorkerStatus is a live worker: a runner, or a process that writes.
type WorkerStatus struct {
	ID, Info, Role string
	// Refreshed is how long ago its liveness token was last written.
	Refreshed time.Duration
}

// ExportStatus is an export queue: the entries waiting for its sink, the
// oldest of them, and its sink's last error while it fails.
type ExportStatus struct {
	Queue, Observer, Sink string
	Entries, Tombstones   int
	Oldest                time.Time
	LastError             string
}

// Age is how long the oldest waiting entry has waited, as of now.
func (e ExportStatus) Age(now time.Time) time.Duration {
	if e.Oldest.IsZero() {
		return 0
	}
	return max(0, now.Sub(e.Oldest)).Round(time.Millisecond)
}

// StatusFunc gathers the status page's Status.
type StatusFunc func(ctx context.Context) (*Status, error)

// ServerOption configures Server.
type ServerOption func(*server)

// WithStatus adds the status page, /status, gathered by f, and a link to
// it in every page's header. Nil f adds nothing.
func WithStatus(f StatusFunc) ServerOption {
	return func(s *server) { s.status = f }
}

// statusRefresh is how often the status page reloads itself (a meta
// refresh: no script).
const statusRefresh = 5

// WithHistory adds charts of h's samples to the status page.
func WithHistory(h *History) ServerOption {
	return func(s *server) { s.history = h }
}

// statusData is the status page's: the status now and the charts.
type statusData struct {
	*Status
	Charts []chart
	// Charting says the page has a History (whose charts need two
	// samples before they draw anything).
	Charting bool
}

func (s *server) statusPage(w http.ResponseWriter, r *http.Request) {
	st, err := s.status(r.Context())
	if err != nil {
		s.fail(w, r, 0, err)
		return
	}
	d := statusData{Status: st, Charting: s.history != nil}
	if s.history != nil {
		d.Charts = charts(s.history.Samples())
	}
	s.render(w, r, "status", view{Title: "Status", Refresh: statusRefresh, Data: d})
}
