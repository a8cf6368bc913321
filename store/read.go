package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/trickle-dev/trickle/store/internal/keys"
)

// ReadRow returns, for each column of cols in order, the versions the spans
// select (newest first within a span; spans in the given order). Nil or empty
// spans mean AllVersions. All columns must belong to one locality group, and
// spans must not overlap.
//
// It uses one iterator bounded to the row. For each column it issues a
// prefix seek to the first span's newest timestamp, which lets pebble skip
// every sstable whose bloom filter rules the column out. For each later span
// of the column it seeks again only if the iterator is not already at or
// past that span's newest timestamp having consumed everything in between
// (e.g. the previous span ended there, or the column has no more versions),
// which saves a seek per span in the common lock-then-newest-write reads.
// A read of one exact version of one column (a single span with MinTs ==
// MaxTs) is a Get instead, which needs no iterator and stops at the newest
// level that has the key.
func (db *DB) ReadRow(ctx context.Context, table string, row []byte, cols []Column, spans []Span) ([]Cell, error) {
	const op = "ReadRow"
	if err := validateTableRow(op, "table", table, "row", row); err != nil {
		return nil, err
	}
	if err := validateSpans(op, "spans", spans); err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, nil
	}
	g0 := db.layout.groupOf(cols[0].Family)
	for i, c := range cols {
		if c.Family == "" {
			return nil, invalid(op, indexed("cols", i, ""), "empty family")
		}
		if g := db.layout.groupOf(c.Family); g != g0 {
			return nil, invalid(op, indexed("cols", i, ".Family"),
				"family %q is in group %q but cols[0] is in group %q",
				c.Family, db.layout.groupName(c.Family), db.layout.groupName(cols[0].Family))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()

	s := getScratch()
	defer putScratch(s)
	if len(cols) == 1 && len(spans) == 1 && spans[0].MinTs == spans[0].MaxTs {
		return db.readVersion(s, g0, table, row, cols[0], spans[0].MaxTs)
	}
	rowPrefix := keys.AppendRowPrefix(s.prefix[:0], g0, table, row)
	// The row prefix ends with the terminator 0x00 0x01; its successor ends
	// with 0x00 0x02.
	s.upper = append(s.upper[:0], rowPrefix...)
	s.upper[len(s.upper)-1]++
	c := &s.cur
	if err := db.openCursor(ctx, c, &s.opts, rowPrefix, s.upper); err != nil {
		return nil, err
	}
	defer c.close()

	spans = spansOrAll(spans)
	s.vals, s.refs = s.vals[:0], s.refs[:0]
	colPrefix := rowPrefix
	for i, col := range cols {
		colPrefix = keys.AppendColumnSuffix(colPrefix[:len(rowPrefix)], col.Family, col.Qualifier)
		// stepPending is set when a span took its last allowed version
		// and the cursor still sits on it: the step past it is only
		// taken if a later span of the column needs the cursor to move.
		stepPending := false
		for j, sp := range spans {
			s.target = keys.AppendTs(append(s.target[:0], colPrefix...), sp.MaxTs)
			if j == 0 {
				// Always seek for a column's first span: the cursor may
				// be in another column, or (if cols repeats a column) past
				// versions consumed for an earlier entry of cols.
				c.seekPrefixGE(s.target)
			} else {
				if stepPending {
					c.next()
					stepPending = false
				}
				c.seekSpan(s.target)
			}
			for n := 0; c.valid(); {
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
				s.vals = append(s.vals, v...)
				s.refs = append(s.refs, cellRef{col: i, ts: ts, valEnd: len(s.vals)})
				if n++; n == sp.Limit {
					stepPending = true
					break
				}
				c.next()
			}
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	s.prefix = colPrefix[:0] // keep the grown buffer
	return s.cells(row, cols), nil
}

// readVersion reads one exact version of a column with Get, which stops at
// the newest level that has the key and, like a prefix seek, consults only
// sstables whose bloom filter may hold the column.
func (db *DB) readVersion(s *scratch, g keys.Group, table string, row []byte, col Column, ts uint64) ([]Cell, error) {
	s.target = keys.AppendEncode(s.target[:0], keys.Key{Group: g, Table: table, Row: row,
		Family: col.Family, Qualifier: col.Qualifier, Ts: ts})
	if db.hooks.seek != nil {
		db.hooks.seek(s.target)
	}
	v, closer, err := db.pdb.Get(s.target)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: reading %x: %w", s.target, err)
	}
	defer closer.Close()
	return []Cell{makeCell(row, col, ts, v)}, nil
}

// cells builds the cells recorded in s.refs, all in one allocation for the
// cells and one for their bytes. Every Row and Value is capacity-limited, so
// appending to one never overwrites another: each cell owns its memory.
func (s *scratch) cells(row []byte, cols []Column) []Cell {
	if len(s.refs) == 0 {
		return nil
	}
	out := make([]Cell, len(s.refs))
	buf := make([]byte, len(s.refs)*len(row)+len(s.vals))
	off, valStart := 0, 0
	for i, r := range s.refs {
		n := copy(buf[off:], row)
		out[i].Row = buf[off : off+n : off+n]
		off += n
		n = copy(buf[off:], s.vals[valStart:r.valEnd])
		out[i].Value = buf[off : off+n : off+n]
		off += n
		valStart = r.valEnd
		out[i].Column = cols[r.col]
		out[i].Ts = r.ts
	}
	return out
}
