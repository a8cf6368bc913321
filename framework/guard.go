package framework

import (
	"fmt"
	"maps"

	"github.com/trickle-dev/trickle/internal/engine"
)

// Guard declares that every transaction writing a cell of Family in Table
// also writes another cell, the cell's guard: a search index's postings
// (one cell per term row) are written only with the state of their
// document, say.
//
// Snapshot isolation refuses one of two concurrent transactions that write
// a cell in common. Two writers of a guarded cell both write its guard, so
// the guard's conflict check decides for both cells, and a commit in one
// phase leaves the guarded cell's own check out: one seek into the store
// less per cell, which for a document with a hundred terms is most of its
// commit. Commits enforce the declaration: a transaction that writes a
// guarded cell without its guard fails with ErrUnguarded and writes
// nothing. The declaration holds for the whole family, so every process
// that writes the family must make it (a process whose Registry lacks it
// checks the cells as any other, but must still write the guard).
type Guard struct {
	// Table and Family name the guarded cells.
	Table, Family string
	// Of returns the guard of the cell (row, col) of Table: a cell of
	// another family, not itself guarded. It must not keep row.
	Of func(row []byte, col Column) (table string, guardRow []byte, guardCol Column)
}

// Guard adds a guard declaration. The family may be declared once; the
// error wraps ErrInvalidObserver and says what is wrong.
func (r *Registry) Guard(g Guard) error {
	if g.Of == nil {
		return fmt.Errorf("%w: guard of %s/%s: nil Of", ErrInvalidObserver, g.Table, g.Family)
	}
	if err := engine.ValidateColumn("Guard", g.Table, Column{Family: g.Family}); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidObserver, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen {
		return fmt.Errorf("%w: cannot declare the guard of %s/%s: the registry is in use by a runner", ErrInvalidObserver, g.Table, g.Family)
	}
	k := tableColumn{g.Table, Column{Family: g.Family}}
	next := map[tableColumn]Guard{k: g}
	if cur := r.guards.Load(); cur != nil {
		if _, ok := (*cur)[k]; ok {
			return fmt.Errorf("%w: guard of %s/%s declared twice", ErrInvalidObserver, g.Table, g.Family)
		}
		maps.Copy(next, *cur)
	}
	r.guards.Store(&next)
	return nil
}

// GuardOf returns the guard of the cell (table, row, col) that a
// declaration gives it, and false if none does. A Registry is the guard
// set its DB's commits use.
func (r *Registry) GuardOf(table string, row []byte, col Column) (gTable string, gRow []byte, gCol Column, ok bool) {
	guards := r.guards.Load()
	if guards == nil {
		return "", nil, Column{}, false
	}
	g, ok := (*guards)[tableColumn{table, Column{Family: col.Family}}]
	if !ok {
		return "", nil, Column{}, false
	}
	gTable, gRow, gCol = g.Of(row, col)
	return gTable, gRow, gCol, true
}

var _ engine.GuardSet = (*Registry)(nil)

// Guards returns the guard declarations, in no particular order. Runners
// publish their tables and families in the store, so that a process that
// writes without them refuses to write a guarded cell (ErrUnguarded)
// rather than write it without its guard.
func (r *Registry) Guards() []Guard {
	guards := r.guards.Load()
	if guards == nil {
		return nil
	}
	out := make([]Guard, 0, len(*guards))
	for _, g := range *guards {
		out = append(out, g)
	}
	return out
}
