package admin

import (
	"context"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/notify"
)

// ErrUnknownObserver is returned by Backfill for an observer no runner
// has published: start a runner with the new observer first, so that
// writes made during the backfill notify it.
var ErrUnknownObserver = notify.ErrUnknownObserver

// BackfillOptions configure Backfill. The zero value is usable.
type BackfillOptions struct {
	// BatchRows is how many rows one batch reads and notifies. Default:
	// 500.
	BatchRows int
	// Restart starts over instead of resuming an unfinished backfill of
	// the observer (a finished one starts over anyway). Default: false.
	Restart bool
	// Progress, if set, is called after each batch.
	Progress func(BackfillProgress)
}

// BackfillProgress is where a backfill stands: rows read and cells
// notified so far (those of earlier runs of a resumed backfill included),
// the row it goes on from, whether it is done.
type BackfillProgress struct {
	Observer, Table  string
	Rows, Cells      int64
	Next             []byte
	Done, Resumed    bool
	Started, Updated time.Time
}

func progressOf(p notify.BackfillProgress) BackfillProgress {
	return BackfillProgress{Observer: p.Observer, Table: p.Table, Rows: p.Rows, Cells: p.Cells, Next: p.Next,
		Done: p.Done, Resumed: p.Resumed, Started: p.Started, Updated: p.Updated}
}

// Backfill brings a new observer up to date with the data already in the
// store: it notifies every existing cell of the observer's columns, in
// batches of rows read each from a fresh snapshot, and returns how many
// rows and cells it notified. The observer must be published (a runner
// with it started): its runs then follow as for any write, and the state
// it keeps ends as if it had been there from the start.
//
// It collides with no transaction: notifications are written beside the
// data, not into it. A write made meanwhile notifies the observer itself;
// a strong observer whose ack shows it already handled a cell's latest
// write does not run for it again. Progress is kept in the store after
// every batch: a backfill that stopped (its process died) resumes after
// its last recorded batch when run again, unless opts.Restart.
func Backfill(ctx context.Context, db *framework.DB, observer string, opts *BackfillOptions) (BackfillProgress, error) {
	var o BackfillOptions
	if opts != nil {
		o = *opts
	}
	no := notify.BackfillOptions{BatchRows: o.BatchRows, Restart: o.Restart}
	if o.Progress != nil {
		no.Progress = func(p notify.BackfillProgress) { o.Progress(progressOf(p)) }
	}
	p, err := notify.Backfill(ctx, db, observer, no)
	return progressOf(p), err
}
