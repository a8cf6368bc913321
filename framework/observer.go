package framework

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trickle-dev/trickle/internal/engine"
)

// ObserverKind says what makes an observer run.
type ObserverKind uint8

const (
	// Strong observers run after a transaction writes an observed column.
	// Each observed change makes at most one observer transaction commit,
	// and several changes made before a run collapse into that one run.
	Strong ObserverKind = 1
	// Weak observers run when someone asks, through NotifyWeak, and may run
	// more than once per request. Writing a weak column notifies nobody.
	// They suit work that is combined or recomputed rather than applied
	// once, such as draining a queue of updates to a hot counter.
	Weak ObserverKind = 2
)

func (k ObserverKind) String() string { return engine.Kind(k).String() }

// ObserverFunc is an observer's work: it runs inside a transaction that the
// framework commits (and runs again at a new snapshot on a conflict), for
// the cell (row, col) that changed. What it writes commits atomically with
// the observer's bookkeeping, so a change is handled exactly once however
// often it is delivered.
type ObserverFunc func(ctx context.Context, tx *Txn, row []byte, col Column) error

// Observer binds a function to the columns of a table it observes.
type Observer struct {
	// Name identifies the observer; it is stored with its bookkeeping, so
	// it must stay stable across releases.
	Name    string
	Table   string
	Columns []Column
	Kind    ObserverKind
	Fn      ObserverFunc
	// Delay, if positive, holds a notification of the observer's columns
	// back for that long after a scanner first finds it, so that the
	// changes arriving meanwhile are dealt with by one run: for an observer
	// that recomputes something from many changes, a run per burst rather
	// than per change. Every notification is still run; the delay is
	// latency added to each. Default: 0, run at once.
	Delay time.Duration
}

type tableColumn struct {
	table string
	col   Column
}

// Registry is the explicit list of observers a runner runs: built in main,
// handed to the runner, and frozen when the runner starts, so that the set
// of observers cannot change under running workers.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]*Observer
	byCol  map[tableColumn]*Observer
	// guards holds the guard declarations by table and family (no
	// qualifier). Guard replaces the map rather than changing it, so that
	// commits, which look up every cell they write, read it without the
	// lock; nil until a guard is declared.
	guards atomic.Pointer[map[tableColumn]Guard]
	frozen bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]*Observer{}, byCol: map[tableColumn]*Observer{}}
}

// Register adds an observer. Names and observed columns must be unique; the
// error wraps ErrInvalidObserver and says what is wrong.
func (r *Registry) Register(o Observer) error {
	switch {
	case o.Name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidObserver)
	case o.Fn == nil:
		return fmt.Errorf("%w: %s: nil function", ErrInvalidObserver, o.Name)
	case o.Kind != Strong && o.Kind != Weak:
		return fmt.Errorf("%w: %s: kind must be Strong or Weak", ErrInvalidObserver, o.Name)
	case len(o.Columns) == 0:
		return fmt.Errorf("%w: %s: observes no column", ErrInvalidObserver, o.Name)
	case o.Delay < 0:
		return fmt.Errorf("%w: %s: negative delay %v", ErrInvalidObserver, o.Name, o.Delay)
	}
	for _, c := range o.Columns {
		if err := engine.ValidateColumn("Register "+o.Name, o.Table, c); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidObserver, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return fmt.Errorf("%w: cannot register %s: the registry is in use by a runner", ErrInvalidObserver, o.Name)
	}
	if _, ok := r.byName[o.Name]; ok {
		return fmt.Errorf("%w: name %q registered twice", ErrInvalidObserver, o.Name)
	}
	for _, c := range o.Columns {
		if prev, ok := r.byCol[tableColumn{o.Table, c}]; ok {
			return fmt.Errorf("%w: %s/%s is observed by %s and %s", ErrInvalidObserver, o.Table, c, prev.Name, o.Name)
		}
	}
	o.Columns = slices.Clone(o.Columns)
	r.byName[o.Name] = &o
	for _, c := range o.Columns {
		r.byCol[tableColumn{o.Table, c}] = &o
	}
	return nil
}

// Freeze forbids further registration. Runners freeze the registry they
// are given.
func (r *Registry) Freeze() {
	r.mu.Lock()
	r.frozen = true
	r.mu.Unlock()
}

// Lookup returns the observer of a column.
func (r *Registry) Lookup(table string, col Column) (Observer, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	o, ok := r.byCol[tableColumn{table, col}]
	if !ok {
		return Observer{}, false
	}
	return *o, true
}

// registrySet is r as the engine's observed set: which columns a
// transaction must notify.
type registrySet struct{ r *Registry }

func (s registrySet) ObservedKind(table string, col Column) (engine.Kind, bool) {
	return s.r.observedKind(table, col)
}

func (r *Registry) observedKind(table string, col Column) (engine.Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	o, ok := r.byCol[tableColumn{table, col}]
	if !ok {
		return 0, false
	}
	return engine.Kind(o.Kind), true
}

// Observers returns the registered observers sorted by name.
func (r *Registry) Observers() []Observer {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Observer, 0, len(r.byName))
	for _, o := range r.byName {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b Observer) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// Tables returns the tables that have observed columns, sorted.
func (r *Registry) Tables() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var ts []string
	for tc := range r.byCol {
		if !slices.Contains(ts, tc.table) {
			ts = append(ts, tc.table)
		}
	}
	slices.Sort(ts)
	return ts
}
