package store

import (
	"bytes"
	"context"
	"fmt"

	"github.com/trickle-dev/trickle/store/internal/keys"
)

// ReadRow returns, for each column of cols in order, the versions the spans
// select (newest first within a span; spans in the given order). Nil or empty
// spans mean AllVersions. All columns must belong to one locality group, and
// spans must not overlap.
//
// It uses one iterator bounded to the row. For each column and span it seeks
// to the span's newest timestamp, unless the iterator is already at or past
// that point having consumed everything in between (e.g. the previous span
// ended there, or the previous column's versions ran into this column), which
// saves a seek per span in the common newest-version reads.
func (db *DB) ReadRow(ctx context.Context, table string, row []byte, cols []Column, spans []Span) ([]Cell, error) {
	const op = "ReadRow"
	if err := validateTableRow(op, "table", table, "row", row); err != nil {
		return nil, err
	}
	if err := validateSpans(op, "spans", spans); err != nil {
		return nil, err
	}
	for i, c := range cols {
		if err := validateColumn(op, fmt.Sprintf("cols[%d]", i), c); err != nil {
			return nil, err
		}
		if g, g0 := db.layout.groupName(c.Family), db.layout.groupName(cols[0].Family); g != g0 {
			return nil, invalid(op, fmt.Sprintf("cols[%d].Family", i),
				"family %q is in group %q but cols[0] is in group %q", c.Family, g, g0)
		}
	}
	if len(cols) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()

	rowPrefix := keys.AppendRowPrefix(nil, db.layout.groupOf(cols[0].Family), table, row)
	c, err := db.newIter(ctx, rowPrefix, keys.PrefixSuccessor(rowPrefix))
	if err != nil {
		return nil, err
	}
	defer c.close()

	spans = spansOrAll(spans)
	var out []Cell
	var colPrefix, target []byte
	seekCol := 0 // cols[seekCol:i] were read since the last seek
	for i, col := range cols {
		colPrefix = keys.AppendColumnSuffix(append(colPrefix[:0], rowPrefix...), col.Family, col.Qualifier)
		// Keys consumed since the last seek must not be skipped over again:
		// that could only happen if this column was already read since then.
		reread := false
		for _, prev := range cols[seekCol:i] {
			reread = reread || prev == col
		}
		for j, sp := range spans {
			target = keys.AppendTs(append(target[:0], colPrefix...), sp.MaxTs)
			if reread && j == 0 {
				c.seekGE(target)
			} else if !c.seekSpan(target) {
				seekCol = i
			}
			for n := 0; c.valid() && (sp.Limit == 0 || n < sp.Limit); n++ {
				k := c.key()
				if len(k) != len(colPrefix)+keys.TsLen || !bytes.HasPrefix(k, colPrefix) {
					break
				}
				ts := keys.DecodeTs(k)
				if ts < sp.MinTs {
					break
				}
				v, err := c.value()
				if err != nil {
					return nil, err
				}
				out = append(out, makeCell(row, col, ts, v))
				c.next()
			}
		}
		if reread {
			seekCol = i
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return out, nil
}
