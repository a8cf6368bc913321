// Package notify is the one path of notifications: finding them in the
// notify locality group (Find), processing them — running the observer of
// the changed column in its own transaction if the column changed since the
// observer's last run, then settling exactly the notifications that run
// dealt with (Processor) — and recording those whose observer keeps failing
// (RecordFailure, Failures). The scanner drives it; nothing else builds
// notify-group scans.
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
