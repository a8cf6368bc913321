package tikvengine

import (
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

// checkGuards applies the guard rule (engine.GuardCheck) to the
// transaction's writes before the commit.
func (tx *Txn) checkGuards() error {
	g := engine.GuardCheck{Guards: tx.db.opts.Guards, Declared: tx.db.opts.DeclaredGuards, Written: func(t string, r []byte, c store.Column) bool {
		_, ok := tx.writes[string(tx.db.codec.dataKey(t, r, c))]
		return ok
	}}
	for _, w := range tx.writes {
		if _, err := g.Check(w.table, w.row, w.col); err != nil {
			return err
		}
	}
	return nil
}
