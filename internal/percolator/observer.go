package percolator

import "fmt"

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

// ObservedSet tells a transaction which columns carry notifications: a
// write to a strongly observed column also writes a notify cell, and only
// weakly observed columns accept NotifyWeak. A runner's registry is one;
// processes that write but run no observers use the set a runner published
// in the store (LoadObserved).
type ObservedSet interface {
	ObservedKind(table string, col Column) (ObserverKind, bool)
}

// ValidateColumn checks that a table and column may be used by transactions
// (not empty, not reserved), for code that registers observers.
func ValidateColumn(op, table string, col Column) error {
	return validateKey(op, table, []byte{0}, col)
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
