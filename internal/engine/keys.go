package engine

import (
	"fmt"
	"strings"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// The rules for the cells a transaction may name, the same on every
// engine so that observer code behaves the same whichever runs it: no
// empty table, row or family, and none of the framework's reserved tables
// and families. A refusal matches ErrInvalidKey and names op.

// ValidateKey checks a cell a transaction reads or writes.
func ValidateKey(op, table string, row []byte, col store.Column) error {
	if err := ValidateTable(op, table); err != nil {
		return err
	}
	if len(row) == 0 {
		return fmt.Errorf("%w: %s: empty row in table %q", ErrInvalidKey, op, table)
	}
	return ValidateFamily(op, col.Family)
}

// ValidateTable checks the table of a scan or a search for notifications.
func ValidateTable(op, table string) error {
	switch {
	case table == "":
		return fmt.Errorf("%w: %s: empty table name", ErrInvalidKey, op)
	case strings.HasPrefix(table, protocol.ReservedPrefix):
		return fmt.Errorf("%w: %s: table %q: names starting with %q are reserved", ErrInvalidKey, op, table, protocol.ReservedPrefix)
	}
	return nil
}

// ValidateFamily checks a column family a transaction names.
func ValidateFamily(op, family string) error {
	switch {
	case family == "":
		return fmt.Errorf("%w: %s: empty column family", ErrInvalidKey, op)
	case family == protocol.NotifyFamily || strings.HasPrefix(family, protocol.ReservedPrefix):
		return fmt.Errorf("%w: %s: column family %q is reserved", ErrInvalidKey, op, family)
	}
	return nil
}

// ValidateScan checks the table, families and columns a scan names.
func ValidateScan(o *ScanOptions) error {
	if err := ValidateTable("Scan", o.Table); err != nil {
		return err
	}
	for _, f := range o.Families {
		if err := ValidateFamily("Scan", f); err != nil {
			return err
		}
	}
	for _, c := range o.Columns {
		if err := ValidateFamily("Scan", c.Family); err != nil {
			return err
		}
	}
	if a := o.After; a != nil {
		if len(a.Row) == 0 {
			return fmt.Errorf("%w: Scan: After has an empty row", ErrInvalidKey)
		}
		if err := ValidateFamily("Scan", a.Column.Family); err != nil {
			return err
		}
	}
	return nil
}

// ValidateColumn checks that a table and column may be used by
// transactions (not empty, not reserved), for code that registers
// observers and guards.
func ValidateColumn(op, table string, col store.Column) error {
	return ValidateKey(op, table, []byte{0}, col)
}
