package engine

import (
	"context"
	"errors"
	"fmt"
	"iter"
)

// Notification names a cell whose observer should run.
type Notification struct {
	Table  string
	Row    []byte
	Column Column
}

func (n Notification) String() string { return fmt.Sprintf("%s/%q/%s", n.Table, n.Row, n.Column) }

// Notifications is how an engine keeps the notifications its commits
// leave, as the observer runtime works through them: find one, read what
// is pending for it, run the observer in a transaction that claims the
// change, then settle exactly what that run dealt with. A notification
// written while the observer ran is not settled by it, so the next run
// sees its write.
type Notifications interface {
	// Find yields the pending notifications of table whose rows are in
	// [start, end) (nil: unbounded), in row order, reading nothing but
	// notifications. One that does not decode is yielded as an error
	// matching ErrUndecodable and the sequence goes on; another error
	// ends it.
	Find(ctx context.Context, table string, start, end []byte) iter.Seq2[Notification, error]
	// Pending reads what is pending for n now, before the run's snapshot
	// is drawn, so that the run sees every write it announces; nil if
	// nothing is.
	Pending(ctx context.Context, n Notification) (*Pending, error)
	// Claim is the first thing an observer's run does in its transaction
	// tx, for what Pending returned as p. For a strong observer it
	// reports whether p's column changed since the observer's last
	// committed run and, if so, records this run as the last, so that of
	// two concurrent runs for one change at most one commits: they
	// conflict on the record. A weak observer's run always goes ahead.
	// Either way the engine may settle p in tx (remove, with the run's
	// commit, what the run sees of p), which saves Settle a transaction
	// of its own: it must be, since tx's snapshot is drawn after Pending
	// read p.
	Claim(ctx context.Context, tx Txn, observer string, kind Kind, p *Pending) (changed bool, err error)
	// Settle removes what p holds that the run whose snapshot was runTs
	// dealt with: what it could see, and what will never be written. The
	// runtime calls it once the run committed, whatever Claim settled.
	Settle(ctx context.Context, p *Pending, runTs uint64) (Settled, error)
	// Discard removes all that p holds: its column is no longer observed.
	Discard(ctx context.Context, p *Pending) error
	// Backlog yields every pending notification of table with the
	// versions pending for it, in row order, reading nothing but
	// notifications: what operators count and measure lag by. One that
	// does not decode is yielded with an error matching ErrUndecodable
	// (its Versions still counted) and the sequence goes on.
	Backlog(ctx context.Context, table string) iter.Seq2[Waiting, error]
	// Renotify notifies the cells of rows (each row's Columns) as if each
	// had just been written, whatever their observers' kind, and hands the
	// rows to the engine's Notified hook: how a new observer is backfilled
	// over what its columns held before it was published. The cells were
	// read in a snapshot at, which every run of theirs must see. It
	// returns how many cells it notified, durable when it returns.
	Renotify(ctx context.Context, at uint64, rows []NotifiedRow) (int, error)
}

// Waiting is a notification and the versions pending for it (the
// timestamps of the writes or requests that announced it), newest first.
type Waiting struct {
	Notification
	Versions []uint64
}

// ErrUndecodable marks a stored notification that Find could not decode;
// the sequence goes on after it.
var ErrUndecodable = errors.New("notify: undecodable notification")

// Pending is what is pending for a notification when its run starts: one
// version per write (or request) that announced it, newest first.
type Pending struct {
	Notification
	// Versions are the timestamps of the pending versions, newest first.
	Versions []uint64
	// Traces are the trace contexts (W3C traceparent) the versions carry,
	// by index; nil where one carries none, and nil if none does.
	Traces [][]byte
	// State is the engine's own record of the versions, for Settle and
	// Discard.
	State any
}

// Settled counts what Settle did.
type Settled struct {
	// Removed versions the run dealt with; Kept the versions left for a
	// later run (written after its snapshot, or by a writer not settled).
	Removed, Kept int
}
