package framework

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ObserverKind says what makes an observer run.
type ObserverKind uint8

const (
	// Strong observers run after a transaction writes an observed column.
	// Each observed change makes at most one observer transaction commit
	// (runs collide on the observer's ack column), and several changes made
	// before a run collapse into that one run.
	Strong ObserverKind = iota + 1
	// Weak observers run when someone asks, through NotifyWeak, and may run
	// more than once per request. Writing a weak column notifies nobody.
	// They suit work that is combined or recomputed rather than applied
	// once, such as draining a queue of updates to a hot counter.
	Weak
)

func (k ObserverKind) String() string {
	switch k {
	case Strong:
		return "strong"
	case Weak:
		return "weak"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ObserverFunc is an observer's work: it runs inside a managed transaction
// (committed by the framework, re-run on conflict) for the cell (row, col)
// that changed. It must not commit or roll back tx.
type ObserverFunc func(ctx context.Context, tx *Txn, row []byte, col Column) error

// Observer binds a function to the columns it observes.
type Observer struct {
	// Name identifies the observer; it is stored in the ack column, so it
	// must stay stable across releases.
	Name    string
	Table   string
	Columns []Column
	Kind    ObserverKind
	Fn      ObserverFunc
}

// ObservedSet tells a transaction which columns carry notifications. A
// Registry is one; processes that write but run no observers (a loader) use
// the set a runner published in the store (LoadObserved).
type ObservedSet interface {
	ObservedKind(table string, col Column) (ObserverKind, bool)
}

// Errors about observer registration.
var (
	ErrDuplicateObserver = errors.New("framework: duplicate observer")
	ErrRegistryFrozen    = errors.New("framework: observer registry is frozen")
	ErrInvalidObserver   = errors.New("framework: invalid observer")
)

type tableColumn struct {
	table string
	col   Column
}

// Registry is the explicit list of observers a runner runs. It is built in
// main, handed to the runner, and frozen when the runner starts.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]*Observer
	byCol  map[tableColumn]*Observer
	frozen bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]*Observer{}, byCol: map[tableColumn]*Observer{}}
}

// Register adds an observer. Names and observed columns must be unique.
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
	}
	for _, c := range o.Columns {
		if err := validateKey("Register "+o.Name, o.Table, []byte{0}, c); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidObserver, err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return fmt.Errorf("%w: cannot register %s", ErrRegistryFrozen, o.Name)
	}
	if _, ok := r.byName[o.Name]; ok {
		return fmt.Errorf("%w: name %q registered twice", ErrDuplicateObserver, o.Name)
	}
	for _, c := range o.Columns {
		if prev, ok := r.byCol[tableColumn{o.Table, c}]; ok {
			return fmt.Errorf("%w: %s/%s is observed by %s and %s", ErrDuplicateObserver, o.Table, c, prev.Name, o.Name)
		}
	}
	o.Columns = slices.Clone(o.Columns)
	r.byName[o.Name] = &o
	for _, c := range o.Columns {
		r.byCol[tableColumn{o.Table, c}] = &o
	}
	return nil
}

// Freeze forbids further registration. Runners freeze their registry when
// they start, so the set of observers cannot change under running workers.
func (r *Registry) Freeze() {
	r.mu.Lock()
	r.frozen = true
	r.mu.Unlock()
}

// Lookup returns the observer of a column.
func (r *Registry) Lookup(table string, col Column) (*Observer, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	o, ok := r.byCol[tableColumn{table, col}]
	return o, ok
}

// ObservedKind implements ObservedSet.
func (r *Registry) ObservedKind(table string, col Column) (ObserverKind, bool) {
	o, ok := r.Lookup(table, col)
	if !ok {
		return 0, false
	}
	return o.Kind, true
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
