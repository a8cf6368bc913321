package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/trickle-dev/trickle/cluster"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/internal/retry"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

// WaitOptions configure Wait.
type WaitOptions struct {
	// Poll is the pause between checks. Default: 100ms.
	Poll time.Duration
	// StuckAfter: notifications whose observer failed at least this many
	// times in a row are reported, not waited for. Default: 3.
	StuckAfter int
	// Progress, if set, receives the pending count after each check.
	Progress func(pending, stuck int)
}

// Wait returns when no notification is pending (apart from stuck ones) and
// no transaction began or committed during a final check — Fluo's wait
// semantics: observers that are about to write new notifications draw
// timestamps from the oracle, so a quiet oracle across a check with nothing
// pending means the pipeline is idle. It returns the stuck notifications.
//
// With PD as the oracle (a TiKV store), which counts no deployment's
// timestamps, the final check asks instead that no live worker report a
// running transaction in its liveness token, before and after it. An
// observer run leaves its notification pending until after it committed
// the notifications it makes, so nothing pending twice in a row with no
// worker busy means the observers are idle too.
func Wait(ctx context.Context, n *Node, o WaitOptions) ([]admin.Failure, error) {
	if o.Poll == 0 {
		o.Poll = 100 * time.Millisecond
	}
	if o.StuckAfter == 0 {
		o.StuckAfter = 3
	}
	for {
		issued, busy, err := activity(ctx, n)
		if err != nil {
			return nil, err
		}
		pending, stuck, err := pendingWork(ctx, n, o.StuckAfter)
		if err != nil {
			return nil, err
		}
		if o.Progress != nil {
			o.Progress(pending, len(stuck))
		}
		if pending == 0 && !busy {
			if err := retry.Sleep(ctx, o.Poll); err != nil {
				return nil, err
			}
			again, stuck, err := pendingWork(ctx, n, o.StuckAfter)
			if err != nil {
				return nil, err
			}
			issued2, busy2, err := activity(ctx, n)
			if err != nil {
				return nil, err
			}
			if again == 0 && issued2 == issued && !busy2 {
				return stuck, nil
			}
			continue
		}
		if err := retry.Sleep(ctx, o.Poll); err != nil {
			return nil, err
		}
	}
}

// activity returns what Wait compares across its final check: the count of
// timestamps the deployment's oracle served, or on a TiKV store whether a
// live worker reports a running transaction.
func activity(ctx context.Context, n *Node) (issued uint64, busy bool, err error) {
	if n.TiKV() == nil {
		issued, _, err = n.OracleStats(ctx)
		return issued, false, err
	}
	ws, err := cluster.ListWorkers(ctx, n.js, n.cfg.Namespace+"_workers")
	if err != nil {
		return 0, false, err
	}
	for _, w := range ws {
		if w.OldestActive != 0 {
			return 0, true, nil
		}
	}
	return 0, false, nil
}

// pendingWork counts pending notifications, leaving out stuck ones.
func pendingWork(ctx context.Context, n *Node, stuckAfter int) (int, []admin.Failure, error) {
	pending, err := admin.Pending(ctx, n.st, nil)
	if err != nil {
		return 0, nil, err
	}
	failures, err := admin.Failures(ctx, n.st)
	if err != nil {
		return 0, nil, err
	}
	var stuck []admin.Failure
	for _, f := range failures {
		if f.Attempts >= stuckAfter {
			stuck = append(stuck, f)
		}
	}
	return max(0, pending-len(stuck)), stuck, nil
}

// Status is a snapshot of a deployment.
type Status struct {
	Workers []cluster.WorkerInfo
	// Pending counts the cells with a pending notification, Observers
	// breaks them down by observer with the age of the oldest.
	Pending   int
	Observers []admin.ObserverLag
	Failing   []admin.Failure
	// Taken is when the status was gathered, for the observers' lag.
	Taken         time.Time
	OracleIssued  uint64 // 0 with PD as the oracle, which counts for no one
	OracleCurrent uint64
	// Store names a TiKV store (its PD endpoints and namespace); "" for
	// the pebble store of a data directory.
	Store string
}

// GetStatus gathers the deployment's status.
func GetStatus(ctx context.Context, n *Node) (*Status, error) {
	s := &Status{}
	if n.TiKV() != nil {
		s.Store = n.storeID
	}
	var err error
	if s.OracleIssued, s.OracleCurrent, err = n.OracleStats(ctx); err != nil {
		return nil, err
	}
	if s.Workers, err = cluster.ListWorkers(ctx, n.js, n.cfg.Namespace+"_workers"); err != nil {
		return nil, err
	}
	if s.Observers, err = admin.Lag(ctx, n.st); err != nil {
		return nil, err
	}
	s.Taken = time.Now()
	for _, l := range s.Observers {
		s.Pending += l.Pending
	}
	if s.Failing, err = admin.Failures(ctx, n.st); err != nil {
		return nil, err
	}
	return s, nil
}

// Failures counts the failing notifications of each observer.
func (s *Status) Failures() map[string]int {
	m := map[string]int{}
	for _, f := range s.Failing {
		m[f.Observer]++
	}
	return m
}

// Print writes the status for people.
func (s *Status) Print(w io.Writer) {
	if s.Store != "" {
		fmt.Fprintf(w, "store: %s\n", s.Store)
		fmt.Fprintf(w, "oracle: PD, last timestamp %d (%s)\n",
			s.OracleCurrent, oracle.Physical(s.OracleCurrent).UTC().Format(time.RFC3339Nano))
	} else {
		fmt.Fprintf(w, "oracle: last timestamp %d (%s), %d served since start\n",
			s.OracleCurrent, oracle.Physical(s.OracleCurrent).UTC().Format(time.RFC3339Nano), s.OracleIssued)
	}
	fmt.Fprintf(w, "workers alive: %d\n", len(s.Workers))
	for _, wk := range s.Workers {
		role := "writes"
		if wk.Scans {
			role = "runs observers"
		}
		fmt.Fprintf(w, "  %s  %s  %s  (refreshed %s ago)\n", wk.ID, wk.Info, role, time.Since(wk.LastRefresh).Round(time.Millisecond))
	}
	fmt.Fprintf(w, "pending notifications: %d\n", s.Pending)
	if len(s.Observers) > 0 {
		failing := s.Failures()
		fmt.Fprintf(w, "  %-28s %-6s %9s %9s %9s  %s\n", "observer", "kind", "pending", "writes", "failing", "lag (oldest pending write)")
		for _, l := range s.Observers {
			name, kind := l.Observer, l.Kind.String()
			if name == "" {
				name, kind = "(unobserved) "+l.Table, "-"
			}
			lag := "-"
			if l.Pending > 0 {
				lag = l.Age(s.Taken).Round(time.Millisecond).String()
			}
			fmt.Fprintf(w, "  %-28s %-6s %9d %9d %9d  %s\n", name, kind, l.Pending, l.Writes, failing[l.Observer], lag)
		}
	}
	fmt.Fprintf(w, "failing notifications: %d\n", len(s.Failing))
	for _, f := range s.Failing {
		fmt.Fprintf(w, "  %s  observer=%s attempts=%d next=%s\n    last error: %s\n",
			f.String(), f.Observer, f.Attempts, f.NextRetry.Format(time.RFC3339), f.LastError)
	}
}

// ErrNoTable is returned by Scan for a table that holds no cell.
var ErrNoTable = errors.New("runner: no such table")

// Tables lists the tables that hold data, the framework's own (named
// "__...") included, sorted.
func Tables(ctx context.Context, n *Node) ([]string, error) {
	seen := map[string]bool{}
	for _, g := range []string{store.DefaultGroup, protocol.NotifyGroup} {
		ts, err := n.st.Tables(ctx, g)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			seen[t] = true
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// Scan writes a table's raw cells, including lock, write, ack and notify
// metadata, for debugging. A table that holds no cell is an error wrapping
// ErrNoTable that lists the tables there are.
func Scan(ctx context.Context, n *Node, table string, start, end []byte, w io.Writer) error {
	tables, err := Tables(ctx, n)
	if err != nil {
		return err
	}
	if !slices.Contains(tables, table) {
		return fmt.Errorf("%w: %q holds no data (tables: %s)", ErrNoTable, table, strings.Join(tables, ", "))
	}
	return admin.Dump(ctx, n.st, table, w, admin.DumpOptions{Start: start, End: end})
}

// Unpublish removes from the deployment's store the published columns of
// the named observers, and nothing else (see notify.Unpublish): for
// observers no runner runs any more, whose columns writers would
// otherwise keep notifying. Runners publish only what they add, so this
// is the one way an observer stops being published. It returns how many
// columns it removed; a name with none published fails with
// notify.ErrNotPublished, removing nothing.
func Unpublish(ctx context.Context, n *Node, observers ...string) (int, error) {
	return notify.Unpublish(ctx, n.st, observers...)
}
