package percolator

import "github.com/trickle-dev/trickle/internal/engine"

// ObserverKind says what makes an observer run (see engine.Kind).
type ObserverKind = engine.Kind

// The kinds of observers.
const (
	Strong = engine.Strong
	Weak   = engine.Weak
)

// ObservedSet tells a transaction which columns carry notifications (see
// engine.ObservedSet).
//
// A write to a strongly observed column also writes a notify cell, and
// only weakly observed columns accept NotifyWeak. A runner's registry is
// one; processes that write but run no observers use the set a runner
// published in the store (internal/published).
type ObservedSet = engine.ObservedSet
