package percolator

import (
	"github.com/trickle-dev/trickle/internal/engine"
)

// GuardSet tells commits which cells are guarded (see engine.GuardSet).
type GuardSet = engine.GuardSet

// GuardedFamilies tells which families a deployment declared guarded:
// the ones runners published (see internal/published).
type GuardedFamilies = engine.GuardedFamilies

// markGuarded applies the guard rule (engine.GuardCheck) to the buffered
// writes, flagging those whose guard the transaction also writes so that
// a one-phase commit leaves their checks out.
func (tx *Txn) markGuarded() error {
	g := engine.GuardCheck{Guards: tx.db.opts.Guards, Declared: tx.db.opts.DeclaredGuards, Written: func(t string, r []byte, c Column) bool {
		_, ok := tx.writes[bufKey(t, r, c)]
		return ok
	}}
	if !g.Active() {
		return nil
	}
	for _, m := range tx.writes {
		guarded, err := g.Check(m.key.Table, m.key.Row, m.key.Column)
		if err != nil {
			return err
		}
		if guarded {
			m.guarded = true
		}
	}
	return nil
}
