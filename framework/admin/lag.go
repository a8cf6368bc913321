package admin

import (
	"context"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

// ObserverLag is how far behind one observer is.
type ObserverLag struct {
	// Observer is the observer's name; "" for notifications of columns
	// no observer publishes any more (a runner will drop them).
	Observer string
	Table    string
	Kind     framework.ObserverKind
	// Pending counts the cells whose notification waits for the observer;
	// Writes the writes they announce (several writes to a cell before a
	// run collapse into that run).
	Pending, Writes int
	// OldestTs is the timestamp of the oldest pending write (0 if none),
	// Oldest the oracle's time in it: the observer has owed a run since.
	OldestTs uint64
	Oldest   time.Time
}

// Age is how long the observer has owed its oldest pending run, as of
// now: 0 when nothing is pending.
func (l ObserverLag) Age(now time.Time) time.Duration {
	if l.OldestTs == 0 {
		return 0
	}
	return max(0, now.Sub(l.Oldest))
}

// Lag reports every published observer's pending notifications and the
// oldest of them, sorted by observer name. It reads every pending
// notification version (the notify locality group, nothing else), so it
// costs as much as the backlog is long: for status pages and metrics
// sampled every few seconds, not for every request.
func Lag(ctx context.Context, st store.Store) ([]ObserverLag, error) {
	ls, err := notify.Lag(ctx, st)
	if err != nil {
		return nil, err
	}
	out := make([]ObserverLag, len(ls))
	for i, l := range ls {
		out[i] = ObserverLag{Observer: l.Observer, Table: l.Table, Kind: l.Kind,
			Pending: l.Pending, Writes: l.Writes, OldestTs: l.Oldest}
		if l.Oldest != 0 {
			out[i].Oldest = oracle.Physical(l.Oldest)
		}
	}
	return out, nil
}
