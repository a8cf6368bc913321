// Package notify is the observer runtime, the one path of notifications:
// finding them (Find, Processor.Find), processing them — running the
// observer of the changed column in its own transaction if the column
// changed since the observer's last run, then settling exactly the
// notifications that run dealt with (Processor) — and recording those
// whose observer keeps failing (RecordFailure, Failures). It works with
// the transaction engine behind a framework.DB through the engine seam
// only (finding, reading what is pending, claiming a change, settling),
// so it runs unchanged on any engine. The scanner drives it.
package notify

import (
	"fmt"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// Column names a column as family:qualifier.
type Column = store.Column

// Notification names a cell whose observer should run.
type Notification struct {
	Table  string
	Row    []byte
	Column Column
}

func (n Notification) String() string { return fmt.Sprintf("%s/%q/%s", n.Table, n.Row, n.Column) }

func (n Notification) key() protocol.Key {
	return protocol.Key{Table: n.Table, Row: n.Row, Column: n.Column}
}

// Of decodes the notification a notify-group cell of table stands for.
func Of(table string, c store.Cell) (Notification, error) {
	col, err := protocol.ObservedColumn(c.Column)
	if err != nil {
		return Notification{}, err
	}
	return Notification{Table: table, Row: c.Row, Column: col}, nil
}
