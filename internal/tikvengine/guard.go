package tikvengine

import (
	"fmt"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/store"
)

// written is a cell a transaction wrote, kept for the guard rule.
type written struct {
	table string
	row   []byte
	col   store.Column
}

// noteWrite records a write for checkGuards, when there are guards to
// check.
func (tx *Txn) noteWrite(table string, row []byte, col store.Column) {
	if tx.db.opts.Guards == nil && tx.db.opts.DeclaredGuards == nil {
		return
	}
	k := string(tx.db.codec.dataKey(table, row, col))
	if tx.writes == nil {
		tx.writes = map[string]written{}
	}
	tx.writes[k] = written{table, row, col}
}

// checkGuards enforces the guard rule of the engine seam before the
// commit: a transaction that writes a guarded cell writes its guard too,
// and writes no cell of a family the deployment declared guarded whose
// guard this DB does not know. TiKV checks every key for conflicts, so the
// rule saves this engine nothing; it is enforced so that a writer behaves
// the same on either engine, and a deployment can move between them.
func (tx *Txn) checkGuards() error {
	gs, declared := tx.db.opts.Guards, tx.db.opts.DeclaredGuards
	for _, w := range tx.writes {
		var t string
		var r []byte
		var c store.Column
		ok := false
		if gs != nil {
			t, r, c, ok = gs.GuardOf(w.table, w.row, w.col)
		}
		if !ok {
			if declared != nil && declared.Guarded(w.table, w.col.Family) {
				return fmt.Errorf("%w: %s/%q/%s is in family %s of %s, which the deployment's runners declare guarded, and this DB does not know its guard (open it with the Registry that declares it)", engine.ErrUnguarded, w.table, w.row, w.col, w.col.Family, w.table)
			}
			continue
		}
		if _, done := tx.writes[string(tx.db.codec.dataKey(t, r, c))]; !done {
			return fmt.Errorf("%w: %s/%q/%s is guarded by %s/%q/%s, which the transaction does not write", engine.ErrUnguarded, w.table, w.row, w.col, t, r, c)
		}
		if _, _, _, chained := gs.GuardOf(t, r, c); chained {
			return fmt.Errorf("%w: %s/%q/%s is guarded by %s/%q/%s, itself a guarded cell", engine.ErrUnguarded, w.table, w.row, w.col, t, r, c)
		}
	}
	return nil
}
