package percolator

import (
	"context"
	"fmt"
	"slices"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// GetRows reads cols of each of rows of table in the transaction's
// snapshot, plus its own writes, with one store call for all of them (and
// one more for the values too long to sit in their write records): the
// batched read that makes an observer that looks at many rows cost one
// round trip to a remote store instead of one per row. A lock in the way
// is resolved as Get resolves it, cell by cell. The result maps each row
// (as a string) that has a value in at least one of cols to its values.
func (tx *Txn) GetRows(ctx context.Context, table string, rows [][]byte, cols []Column) (map[string]map[Column][]byte, error) {
	if err := tx.checkUsable(false); err != nil {
		return nil, err
	}
	if err := validateGetRows(table, rows, cols); err != nil {
		return nil, err
	}
	if err := tx.checkSnapshot(); err != nil {
		return nil, err
	}
	ctx = tx.withSpan(ctx)
	out := rowValues{}
	// What the transaction wrote itself wins; the rest is read.
	var want []rowCell
	for _, r := range rows {
		for _, c := range cols {
			if m, ok := tx.writes[bufKey(table, r, c)]; ok {
				if m.op == protocol.OpPut {
					out.put(r, c, append([]byte(nil), m.value...))
				}
				continue
			}
			want = append(want, rowCell{r, c})
		}
	}
	data, locked, err := tx.readWriteRecords(ctx, table, want, out)
	if err != nil {
		return nil, err
	}
	if err := tx.readDataRecords(ctx, table, data, out); err != nil {
		return nil, err
	}
	// A lock in the way is resolved cell by cell, as Get resolves it.
	for _, k := range locked {
		v, err := tx.db.readCell(ctx, tx.startTs, k)
		switch {
		case err == nil:
			out.put(k.Row, k.Column, v)
		case err != ErrNotFound:
			return nil, err
		}
	}
	if err := tx.verify(); err != nil {
		return nil, err
	}
	return out, nil
}

// validateGetRows rejects a read GetRows cannot answer unambiguously: an
// invalid or repeated column, or an empty row.
func validateGetRows(table string, rows [][]byte, cols []Column) error {
	for i, c := range cols {
		if err := engine.ValidateKey("GetRows", table, []byte{0}, c); err != nil {
			return err
		}
		if slices.Contains(cols[:i], c) {
			return fmt.Errorf("%w: GetRows: column %s named twice", ErrInvalidKey, c)
		}
	}
	for _, r := range rows {
		if len(r) == 0 {
			return fmt.Errorf("%w: GetRows: empty row in table %q", ErrInvalidKey, table)
		}
	}
	return nil
}

// rowValues is GetRows' result: each row that has a value in at least one
// of the columns asked for, with its values.
type rowValues map[string]map[Column][]byte

func (o rowValues) put(row []byte, col Column, v []byte) {
	m := o[string(row)]
	if m == nil {
		m = map[Column][]byte{}
		o[string(row)] = m
	}
	m[col] = v
}

// rowCell is one cell GetRows reads from the store.
type rowCell struct {
	row []byte
	col Column
}

// dataCell is a cell whose value is too long for its write record: it
// sits in the data record of the write that started at startTs.
type dataCell struct {
	rowCell
	startTs uint64
}

// readWriteRecords reads the newest write record of each of want visible
// at the snapshot, a store call per MaxRowReads rows (a row's cells are
// consecutive in want). Values inline in their write record go to out;
// it returns the cells whose value is in a data record and those behind
// a lock.
func (tx *Txn) readWriteRecords(ctx context.Context, table string, want []rowCell, out rowValues) (data []dataCell, locked []protocol.Key, err error) {
	for lo := 0; lo < len(want); {
		var reads []store.RowRead
		var span []int // reads[i] covers want[span[i]:span[i+1]]
		i := lo
		for i < len(want) && len(reads) < store.MaxRowReads {
			j := i
			var rc []Column
			for j < len(want) && string(want[j].row) == string(want[i].row) {
				rc = append(rc, want[j].col)
				j++
			}
			reads = append(reads, store.RowRead{Table: table, Row: want[i].row, Columns: rc, Spans: protocol.ReadSpans(tx.startTs)})
			span = append(span, i)
			i = j
		}
		span = append(span, i)
		res, err := tx.readRows(ctx, reads)
		if err != nil {
			return nil, nil, fmt.Errorf("framework: read %d rows of %s: %w", len(reads), table, err)
		}
		for ri, cells := range res {
			for _, w := range want[span[ri]:span[ri+1]] {
				var own []store.Cell
				for _, c := range cells {
					if c.Column == w.col {
						own = append(own, c)
					}
				}
				k := protocol.Key{Table: table, Row: w.row, Column: w.col}
				r, err := protocol.InterpretRead(own, tx.startTs)
				switch {
				case err != nil:
					return nil, nil, fmt.Errorf("framework: read %s: %w", k, err)
				case r.Lock != nil:
					locked = append(locked, k)
				case r.Write == nil || r.Write.Op == protocol.OpDelete:
				case r.Write.Inline:
					out.put(w.row, w.col, r.Write.Value)
				default:
					data = append(data, dataCell{w, r.Write.StartTs})
				}
			}
		}
		lo = i
	}
	return data, locked, nil
}

// readDataRecords reads the values of data from their data records into
// out, a store call per MaxRowReads cells. A write record whose data
// record is missing is corruption, not an absent value.
func (tx *Txn) readDataRecords(ctx context.Context, table string, data []dataCell, out rowValues) error {
	for lo := 0; lo < len(data); lo += store.MaxRowReads {
		hi := min(lo+store.MaxRowReads, len(data))
		reads := make([]store.RowRead, 0, hi-lo)
		for _, d := range data[lo:hi] {
			reads = append(reads, store.RowRead{Table: table, Row: d.row, Columns: []Column{d.col}, Spans: protocol.DataSpan(d.startTs)})
		}
		res, err := tx.db.st.ReadRows(ctx, reads)
		if err != nil {
			return fmt.Errorf("framework: read data of %d cells of %s: %w", len(reads), table, err)
		}
		for i, cells := range res {
			d := data[lo+i]
			if len(cells) == 0 {
				return fmt.Errorf("framework: read %s/%q/%s: %w: no data record for write of %d", table, d.row, d.col, protocol.ErrCorrupt, d.startTs)
			}
			out.put(d.row, d.col, cells[0].Value)
		}
	}
	return nil
}
