package store

import (
	"fmt"
	"slices"
	"strconv"
)

// invalid builds the InvalidError for op/field.
func invalid(op, field, format string, args ...any) error {
	return &InvalidError{Op: op, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// validateTableRow rejects the empty table and row: they have no place in a
// Bigtable-style key space and are almost always a caller bug.
func validateTableRow(op, tableField, table, rowField string, row []byte) error {
	if table == "" {
		return invalid(op, tableField, "empty table name")
	}
	if len(row) == 0 {
		return invalid(op, rowField, "empty row")
	}
	return nil
}

// validateColumn rejects the empty family, which is what a zero Column has.
// Qualifiers may be empty.
func validateColumn(op, field string, c Column) error {
	if c.Family == "" {
		return invalid(op, field, "empty family")
	}
	return nil
}

// indexed names the field list[i]rest in an error message. Validation loops
// call it only once they have found an error, so that valid requests do not
// pay for formatting field names.
func indexed(list string, i int, rest string) string {
	return list + "[" + strconv.Itoa(i) + "]" + rest
}

// validateSpans checks each span and that no two spans overlap: overlapping
// spans would return a version twice, and non-overlap is what lets reads skip
// seeks between spans. list names the span list in errors; it is only
// called on one.
func validateSpans(op string, spans []Span, list func() string) error {
	for i, s := range spans {
		if s.MinTs > s.MaxTs {
			return invalid(op, indexed(list(), i, ""), "MinTs %d > MaxTs %d", s.MinTs, s.MaxTs)
		}
		if s.Limit < 0 {
			return invalid(op, indexed(list(), i, ".Limit"), "negative limit %d", s.Limit)
		}
		for j, o := range spans[:i] {
			if s.MinTs <= o.MaxTs && o.MinTs <= s.MaxTs {
				field := list()
				return invalid(op, indexed(field, i, ""), "overlaps %s", indexed(field, j, ""))
			}
		}
	}
	return nil
}

// allVersionsSpans is the span list nil spans stand for. Readers must not
// modify it.
var allVersionsSpans = []Span{AllVersions}

// spansOrAll returns spans, or AllVersions when there are none.
func spansOrAll(spans []Span) []Span {
	if len(spans) == 0 {
		return allVersionsSpans
	}
	return spans
}

// makeCell builds a Cell that owns its memory: row and value are copied into
// one allocation (capacity-limited, so appending to one cannot overwrite the
// other). Pebble's buffers are only valid until the iterator moves.
func makeCell(row []byte, col Column, ts uint64, value []byte) Cell {
	buf := make([]byte, len(row)+len(value))
	copy(buf, row)
	copy(buf[len(row):], value)
	return Cell{
		Row:    slices.Clip(buf[:len(row)]),
		Column: col,
		Ts:     ts,
		Value:  buf[len(row):],
	}
}
