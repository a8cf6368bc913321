// Package shouter is a small observer and its test: the way to write and
// test one. Whenever a note's text changes, the observer writes the text
// in capitals beside it, and counts the changes it saw.
package shouter

import (
	"bytes"
	"context"
	"strconv"

	"github.com/trickle-dev/trickle/framework"
)

// Table and columns the observer reads and writes.
var (
	Table = "notes"
	Text  = framework.Column{Family: "note", Qualifier: "text"}
	Shout = framework.Column{Family: "note", Qualifier: "shout"}
	Edits = framework.Column{Family: "note", Qualifier: "edits"}
)

// Register adds the observer to reg.
func Register(reg *framework.Registry) error {
	return reg.Register(framework.Observer{
		Name: "shouter", Table: Table, Columns: []framework.Column{Text}, Kind: framework.Strong, Fn: shout,
	})
}

func shout(ctx context.Context, tx *framework.Txn, row []byte, col framework.Column) error {
	text, found, err := tx.Lookup(ctx, Table, row, col)
	if err != nil {
		return err
	}
	if !found { // the text was deleted
		return tx.Delete(Table, row, Shout)
	}
	edits, _, err := tx.Lookup(ctx, Table, row, Edits)
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(string(edits))
	if err := tx.Set(Table, row, Edits, []byte(strconv.Itoa(n+1))); err != nil {
		return err
	}
	return tx.Set(Table, row, Shout, bytes.ToUpper(text))
}
