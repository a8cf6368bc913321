package percolator

import (
	"fmt"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
)

// GuardSet tells commits which cells are guarded: cells that every
// transaction writing them writes together with another cell, their guard.
// Snapshot isolation lets two concurrent transactions commit only if they
// write no cell in common; two writers of a guarded cell both write its
// guard, so the guard's conflict check already refuses one of them, and a
// one-phase commit skips the guarded cell's own check (a seek into the
// store per cell). A search index's postings are the case in point: a
// document's postings spread over one row per term, and whoever writes
// them also writes the document's state.
//
// Commits enforce the rule in both phases: a transaction that writes a
// guarded cell without its guard fails with ErrUnguarded, having written
// nothing. A writer that does not know a guard could not write it, and
// the one-phase commits of those that do would no longer see its write as
// a conflict: so the runners publish their guarded families in the store
// (PublishObserved), and a DB refuses to write a cell of a published
// guarded family whose guard it does not know (Options.DeclaredGuards).
type GuardSet = engine.GuardSet

// GuardedFamilies tells which families a deployment declared guarded:
// the ones runners published (PublishedSet).
type GuardedFamilies = engine.GuardedFamilies

// markGuarded flags the buffered writes whose guard the transaction also
// writes, so that a one-phase commit leaves their checks out. It fails
// with ErrUnguarded, naming the cell and its guard, when a guarded cell's
// guard is not written, or is itself guarded (the guard's check must be
// made).
func (tx *Txn) markGuarded() error {
	gs, declared := tx.db.opts.Guards, tx.db.opts.DeclaredGuards
	if gs == nil && declared == nil {
		return nil
	}
	// The cells one transaction guards mostly share a guard (a document's
	// postings, its state): each guard is validated once.
	var valid string
	for _, m := range tx.writes {
		var t string
		var r []byte
		var c Column
		ok := false
		if gs != nil {
			t, r, c, ok = gs.GuardOf(m.key.Table, m.key.Row, m.key.Column)
		}
		if !ok {
			if declared != nil && declared.Guarded(m.key.Table, m.key.Column.Family) {
				return fmt.Errorf("%w: %s is in family %s of %s, which the deployment's runners declare guarded, and this DB does not know its guard (open it with the Registry that declares it)", ErrUnguarded, m.key, m.key.Column.Family, m.key.Table)
			}
			continue
		}
		if gk := bufKey(t, r, c); gk != valid {
			g := protocol.Key{Table: t, Row: r, Column: c}
			if _, written := tx.writes[gk]; !written {
				return fmt.Errorf("%w: %s is guarded by %s, which the transaction does not write", ErrUnguarded, m.key, g)
			}
			if _, _, _, chained := gs.GuardOf(t, r, c); chained {
				return fmt.Errorf("%w: %s is guarded by %s, itself a guarded cell", ErrUnguarded, m.key, g)
			}
			valid = gk
		}
		m.guarded = true
	}
	return nil
}
