package notify

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/enginechoice"
	"github.com/trickle-dev/trickle/internal/published"
	"github.com/trickle-dev/trickle/store"
)

// ObserverLag is how far behind one observer is: the notifications of
// its columns still pending, and the oldest of them. A notification's
// version is the start timestamp of the transaction whose write it
// announces (or the time it was asked for), so the oldest pending version
// tells since when the observer owes a run.
type ObserverLag struct {
	Observer string
	Table    string
	Kind     framework.ObserverKind
	// Pending counts the cells with a pending notification; Writes the
	// notification versions they hold (several writes to one cell before
	// the observer runs are several versions, collapsed into one run).
	Pending, Writes int
	// Oldest is the smallest pending version (0 if none is pending).
	Oldest uint64
}

// Lag reports, for every observer the runners published, its pending notifications and the oldest of them, sorted by
// observer. Notifications of a column nobody observes any more are
// reported under the observer name "" and the table. It reads every
// pending notification version (the engine's Backlog), so its cost is
// that of the backlog.
func Lag(ctx context.Context, st store.Store) ([]ObserverLag, error) {
	ps, err := published.Load(ctx, st)
	if err != nil {
		return nil, err
	}
	cols := ps.Columns()
	type tableColumn struct {
		table string
		col   Column
	}
	byCol := map[tableColumn]*ObserverLag{}
	byName := map[string]*ObserverLag{}
	var tables []string
	for _, c := range cols {
		l := byName[c.Observer]
		if l == nil {
			l = &ObserverLag{Observer: c.Observer, Table: c.Table, Kind: framework.ObserverKind(c.Kind)}
			byName[c.Observer] = l
		}
		byCol[tableColumn{c.Table, c.Column}] = l
		if !slices.Contains(tables, c.Table) {
			tables = append(tables, c.Table)
		}
	}
	n, err := enginechoice.NotificationsIn(ctx, st)
	if err != nil {
		return nil, err
	}
	for _, t := range tables {
		for w, err := range n.Backlog(ctx, t) {
			if err != nil && !errors.Is(err, ErrUndecodable) {
				return nil, fmt.Errorf("notify: lag of the observers of %s: %w", t, err)
			}
			l := byCol[tableColumn{t, w.Column}]
			if err != nil || l == nil {
				l = byName["\x00"+t]
				if l == nil {
					l = &ObserverLag{Table: t}
					byName["\x00"+t] = l
				}
			}
			l.Pending++
			l.Writes += len(w.Versions)
			for _, v := range w.Versions {
				if l.Oldest == 0 || v < l.Oldest {
					l.Oldest = v
				}
			}
		}
	}
	out := make([]ObserverLag, 0, len(byName))
	for _, l := range byName {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b ObserverLag) int {
		if a.Observer != b.Observer {
			if a.Observer < b.Observer {
				return -1
			}
			return 1
		}
		if a.Table < b.Table {
			return -1
		}
		return 0
	})
	return out, nil
}
