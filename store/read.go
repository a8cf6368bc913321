package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/trickle-dev/trickle/internal/keys"
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
// level that has the key. A read of a row an ApplyAtomic is writing waits
// until the write is visible (or ctx ends).
//
// Nothing it returns can be taken back by a crash: pebble makes a synced
// batch readable before it is on stable storage, so a read that met a
// synced write of the row still in flight waits until it is durable (or
// ctx ends) before it answers. A reader may then act on what it read (roll
// a transaction forward from its primary's commit record, or back from
// its rollback record) without a crash of the store undoing the evidence.
// A NoSync write is returned as soon as it is visible: it becomes durable
// with the next synced write, and callers use NoSync only for writes whose
// loss in a crash no one can have acted on.
func (db *DB) ReadRow(ctx context.Context, table string, row []byte, cols []Column, spans []Span) ([]Cell, error) {
	g, err := db.validateRead("ReadRow", -1, table, row, cols, spans)
	if err != nil || len(cols) == 0 {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()
	if err := db.pending.waitRow(ctx, table, row); err != nil {
		return nil, err
	}

	s := getScratch()
	defer putScratch(s)
	src := rowSource{r: db.pdb, get: true}
	defer src.close(s)
	cells, err := db.readRow(ctx, &src, s, g, table, row, cols, spans)
	if err != nil {
		return nil, err
	}
	if err := db.latches.awaitDurable(ctx, table, row); err != nil {
		return nil, err
	}
	return cells, nil
}

// ReadRows reads each of reads as ReadRow would and returns the cells of
// reads[i] as result i. All rows are read from one snapshot of the store,
// taken before the first row is read: no write is seen in one row and
// missed in another, whatever is committed meanwhile. The snapshot is that
// of one pebble iterator, which every row reads through, its bounds moved
// from row to row; so a read of one exact version, which ReadRow serves
// with Get, is a prefix seek of that iterator here. (A pebble Snapshot
// would allow Get, but closing one makes pebble reconsider compactions
// under its mutex: more than a call saves.)
//
// Like ReadRow, it first waits for the ApplyAtomic writes of its rows,
// and answers only once no synced write of a row it read is on its way to
// stable storage any more.
//
// Every read is validated before any is executed; a bad one fails the call
// with an *InvalidError naming it, e.g. reads[3].Columns[0]. At most
// MaxRowReads reads fit in one call; none is a valid call, which returns
// no results without touching the store.
func (db *DB) ReadRows(ctx context.Context, reads []RowRead) ([][]Cell, error) {
	const op = "ReadRows"
	if len(reads) > MaxRowReads {
		return nil, invalid(op, "reads", "%d reads, more than MaxRowReads (%d) in one call", len(reads), MaxRowReads)
	}
	for i := range reads {
		r := &reads[i]
		if _, err := db.validateRead(op, i, r.Table, r.Row, r.Columns, r.Spans); err != nil {
			return nil, err
		}
	}
	if len(reads) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()
	if err := db.pending.waitReads(ctx, reads); err != nil {
		return nil, err
	}

	s := getScratch()
	defer putScratch(s)
	// One read is consistent by itself, whether an iterator or a Get
	// serves it.
	src := rowSource{r: db.pdb, get: len(reads) == 1}
	defer src.close(s)
	out := make([][]Cell, len(reads))
	for i := range reads {
		if r := &reads[i]; len(r.Columns) > 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			cells, err := db.readRow(ctx, &src, s, db.layout.GroupOf(r.Columns[0].Family), r.Table, r.Row, r.Columns, r.Spans)
			if err != nil {
				return nil, err
			}
			out[i] = cells
		}
		if db.hooks.afterRead != nil {
			db.hooks.afterRead(i)
		}
	}
	for i := range reads {
		if err := db.latches.awaitDurable(ctx, reads[i].Table, reads[i].Row); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// validateRead checks the arguments of one row read and returns the group
// of its columns. at is the read's index in a ReadRows call, which names
// the fields (reads[3].Columns[0]); -1 names ReadRow's parameters (cols[0]).
func (db *DB) validateRead(op string, at int, table string, row []byte, cols []Column, spans []Span) (keys.Group, error) {
	if err := validateRead(op, at, table, row, cols, spans, db.layout.GroupName); err != nil || len(cols) == 0 {
		return 0, err
	}
	return db.layout.GroupOf(cols[0].Family), nil
}

// validateRead checks the arguments of one row read; groupOf names the
// group of a family. at is as for DB.validateRead.
func validateRead(op string, at int, table string, row []byte, cols []Column, spans []Span, groupOf func(family string) string) error {
	field := func(param, name string) string {
		if at < 0 {
			return param
		}
		return indexed("reads", at, "."+name)
	}
	if table == "" || len(row) == 0 {
		return validateTableRow(op, field("table", "Table"), table, field("row", "Row"), row)
	}
	if err := validateSpans(op, spans, func() string { return field("spans", "Spans") }); err != nil {
		return err
	}
	if len(cols) == 0 {
		return nil
	}
	g0 := groupOf(cols[0].Family)
	for i, c := range cols {
		if c.Family == "" {
			return invalid(op, indexed(field("cols", "Columns"), i, ""), "empty family")
		}
		if g := groupOf(c.Family); g != g0 {
			list := field("cols", "Columns")
			return invalid(op, indexed(list, i, ".Family"),
				"family %q is in group %q but %s is in group %q",
				c.Family, g, indexed(list, 0, ""), g0)
		}
	}
	return nil
}

// rowSource is what row reads read from. The iterator of its row reads,
// opened by the first that needs one, lives in the scratch's cursor and
// moves from row to row, so that all rows read through it see its
// snapshot.
type rowSource struct {
	r pebble.Reader
	// get allows exact-version reads with Get, which reads r's current
	// state rather than the iterator's snapshot: only for a single row.
	get  bool
	open bool // s.cur holds an iterator of r
}

// cursor returns the scratch's cursor confined to [lower, upper), opening
// its iterator on first use.
func (src *rowSource) cursor(ctx context.Context, db *DB, s *scratch, lower, upper []byte) (*cursor, error) {
	c := &s.cur
	if src.open {
		c.rebound(lower, upper)
		return c, nil
	}
	if err := db.openCursor(ctx, src.r, c, &s.opts, lower, upper, false); err != nil {
		return nil, err
	}
	src.open = true
	return c, nil
}

// close closes the iterator, if one was opened.
func (src *rowSource) close(s *scratch) {
	if src.open {
		s.cur.close()
		src.open = false
	}
}

// readRow reads one row for ReadRow or ReadRows: cols is non-empty and,
// like the other arguments, validated; g is the group of the columns.
func (db *DB) readRow(ctx context.Context, src *rowSource, s *scratch, g keys.Group, table string, row []byte, cols []Column, spans []Span) ([]Cell, error) {
	if src.get && len(cols) == 1 && len(spans) == 1 && spans[0].MinTs == spans[0].MaxTs {
		return db.readVersion(src.r, s, g, table, row, cols[0], spans[0].MaxTs)
	}
	rowPrefix := keys.AppendRowPrefix(s.prefix[:0], g, table, row)
	// The row prefix ends with the terminator 0x00 0x01; its successor ends
	// with 0x00 0x02.
	s.upper = append(s.upper[:0], rowPrefix...)
	s.upper[len(s.upper)-1]++
	c, err := src.cursor(ctx, db, s, rowPrefix, s.upper)
	if err != nil {
		return nil, err
	}

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
func (db *DB) readVersion(r pebble.Reader, s *scratch, g keys.Group, table string, row []byte, col Column, ts uint64) ([]Cell, error) {
	s.target = keys.AppendEncode(s.target[:0], keys.Key{Group: g, Table: table, Row: row,
		Family: col.Family, Qualifier: col.Qualifier, Ts: ts})
	if db.hooks.seek != nil {
		db.hooks.seek(s.target)
	}
	v, closer, err := r.Get(s.target)
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
