package engine

import (
	"bytes"
	"fmt"

	"github.com/trickle-dev/trickle/internal/protocol"
)

// GuardCheck applies the guard rule to the cells one transaction writes,
// before it commits, the same on every engine.
//
// The rule (see GuardSet): a transaction that writes a guarded cell writes
// its guard too, the guard is not itself guarded, and the transaction
// writes no cell of a family the deployment declared guarded whose guard
// Guards does not know. A refusal matches ErrUnguarded and names the cell
// and its guard. The engine over a store leaves a guarded cell's own
// conflict check out of a one-phase commit; TiKV checks every key, so the
// rule saves that engine nothing, and it is enforced there so that a
// writer behaves the same on either engine and a deployment can move
// between them. A GuardCheck is used by one goroutine.
type GuardCheck struct {
	Guards   GuardSet
	Declared GuardedFamilies
	// Written reports whether the transaction writes the cell.
	Written func(table string, row []byte, col Column) bool

	// The cells one transaction guards mostly share a guard (a
	// document's postings, its state): the last guard found valid is not
	// checked again.
	valid      bool
	validTable string
	validRow   []byte
	validCol   Column
}

// Active reports whether there is anything to check: without Guards and
// Declared, no cell is guarded.
func (g *GuardCheck) Active() bool { return g.Guards != nil || g.Declared != nil }

// Check applies the rule to the cell (table, row, col) the transaction
// writes. It reports whether the cell is guarded, its guard written in
// the same transaction, or the error that refuses the transaction.
func (g *GuardCheck) Check(table string, row []byte, col Column) (guarded bool, err error) {
	var t string
	var r []byte
	var c Column
	ok := false
	if g.Guards != nil {
		t, r, c, ok = g.Guards.GuardOf(table, row, col)
	}
	if !ok {
		if g.Declared != nil && g.Declared.Guarded(table, col.Family) {
			k := protocol.Key{Table: table, Row: row, Column: col}
			return false, fmt.Errorf("%w: %s is in family %s of %s, which the deployment's runners declare guarded, and this DB does not know its guard (open it with the Registry that declares it)", ErrUnguarded, k, col.Family, table)
		}
		return false, nil
	}
	if g.valid && t == g.validTable && c == g.validCol && bytes.Equal(r, g.validRow) {
		return true, nil
	}
	k, gk := protocol.Key{Table: table, Row: row, Column: col}, protocol.Key{Table: t, Row: r, Column: c}
	if !g.Written(t, r, c) {
		return false, fmt.Errorf("%w: %s is guarded by %s, which the transaction does not write", ErrUnguarded, k, gk)
	}
	if _, _, _, chained := g.Guards.GuardOf(t, r, c); chained {
		return false, fmt.Errorf("%w: %s is guarded by %s, itself a guarded cell", ErrUnguarded, k, gk)
	}
	g.valid, g.validTable, g.validRow, g.validCol = true, t, r, c
	return true, nil
}
