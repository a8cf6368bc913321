package percolator

import "github.com/trickle-dev/trickle/internal/engine"

// ObserverKind says what makes an observer run (see engine.Kind).
type ObserverKind = engine.Kind

// The kinds of observers.
const (
	Strong = engine.Strong
	Weak   = engine.Weak
)

// ObservedSet tells a transaction which columns carry notifications: a
// write to a strongly observed column also writes a notify cell, and only
// weakly observed columns accept NotifyWeak. A runner's registry is one;
// processes that write but run no observers use the set a runner published
// in the store (LoadObserved).
type ObservedSet = engine.ObservedSet

// ValidateColumn checks that a table and column may be used by transactions
// (not empty, not reserved), for code that registers observers.
func ValidateColumn(op, table string, col Column) error {
	return engine.ValidateKey(op, table, []byte{0}, col)
}

// Union is the observed set of every set given: a column's kind is the one
// the first set that observes it gives.
func Union(sets ...ObservedSet) ObservedSet { return union(sets) }

type union []ObservedSet

func (u union) ObservedKind(table string, col Column) (ObserverKind, bool) {
	for _, s := range u {
		if s == nil {
			continue
		}
		if k, ok := s.ObservedKind(table, col); ok {
			return k, true
		}
	}
	return 0, false
}
