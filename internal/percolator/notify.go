package percolator

import (
	"context"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// ErrNotWeak is returned for a weak notification on a column that no weak
// observer observes.
var ErrNotWeak = engine.ErrNotWeak

func (db *DB) checkWeak(table string, col Column) error {
	if db.opts.Observed == nil {
		return fmt.Errorf("%w: %s/%s (this DB knows no observed columns)", ErrNotWeak, table, col)
	}
	if kind, ok := db.opts.Observed.ObservedKind(table, col); !ok || kind != Weak {
		return fmt.Errorf("%w: %s/%s", ErrNotWeak, table, col)
	}
	return nil
}

// NotifyWeak asks the weak observer of (table, col) to look at row, outside
// any transaction. The request is durable when NotifyWeak returns.
func (db *DB) NotifyWeak(ctx context.Context, table string, row []byte, col Column) error {
	if err := engine.ValidateKey("NotifyWeak", table, row, col); err != nil {
		return err
	}
	if err := db.checkWeak(table, col); err != nil {
		return err
	}
	if err := db.notifyWeak(ctx, table, row, col, traceParent(trace.SpanContextFromContext(ctx))); err != nil {
		return err
	}
	db.notified([]NotifiedRow{{Table: table, Row: row, Columns: []Column{col}}})
	return nil
}

// notifyWeak writes a standalone weak notification carrying the trace
// context tp (nil for none).
func (db *DB) notifyWeak(ctx context.Context, table string, row []byte, col Column, tp []byte) error {
	ts, err := db.or.Timestamp(ctx)
	if err != nil {
		return fmt.Errorf("framework: NotifyWeak: %w", err)
	}
	_, err = db.st.Apply(ctx, &store.RowTxn{Table: table, Row: row, Mutations: []store.Mutation{
		{Column: protocol.NotifyColumn(col), Ts: ts, Value: protocol.NotifyValue(nil, tp)},
	}})
	return err
}

// NotifiedRow is a row that a commit left a notification in; see
// Options.Notified.
type NotifiedRow = engine.NotifiedRow

// MaxNotifiedRows is the most rows Options.Notified is given for one
// commit (engine.MaxNotifiedRows).
const MaxNotifiedRows = engine.MaxNotifiedRows

// notified calls the Notified hook, if any, with rows.
func (db *DB) notified(rows []NotifiedRow) {
	if f := db.opts.Notified; f != nil {
		f(rows)
	}
}

// notifiedRows returns the rows the committed transaction left
// notifications in, each once with the columns notified in it, in no
// particular order (nil past MaxNotifiedRows): those of its writes to
// strongly observed columns and of its weak notifications.
func (tx *Txn) notifiedRows() []NotifiedRow {
	var rows []NotifiedRow
	at := make(map[string]int) // bufKey of a row: its index in rows
	add := func(k protocol.Key) bool {
		bk := bufKey(k.Table, k.Row, Column{})
		if i, ok := at[bk]; ok {
			if !slices.Contains(rows[i].Columns, k.Column) {
				rows[i].Columns = append(rows[i].Columns, k.Column)
			}
			return true
		}
		if len(rows) == MaxNotifiedRows {
			rows = nil
			return false
		}
		at[bk] = len(rows)
		rows = append(rows, NotifiedRow{Table: k.Table, Row: k.Row, Columns: []Column{k.Column}})
		return true
	}
	if obs := tx.db.opts.Observed; obs != nil && tx.strong.Load() {
		for _, m := range tx.writes {
			if strongly(obs, m.key) && !add(m.key) {
				return nil
			}
		}
	}
	for _, k := range tx.weak {
		if !add(k) {
			return nil
		}
	}
	return rows
}

// NotifyWeak asks the weak observer of (table, col) to look at row once
// this transaction commits. The notification is written before the commit
// point, so it cannot be lost once the transaction has committed.
func (tx *Txn) NotifyWeak(table string, row []byte, col Column) error {
	if err := tx.checkUsable(true); err != nil {
		return err
	}
	if err := engine.ValidateKey("NotifyWeak", table, row, col); err != nil {
		return err
	}
	if err := tx.db.checkWeak(table, col); err != nil {
		return err
	}
	// A set beside the ordered list keeps this O(1): an observer may ask
	// for one notification per outlink of a page, hundreds of thousands.
	bk := bufKey(table, row, col)
	if _, dup := tx.weakSet[bk]; dup {
		return nil
	}
	if tx.weakSet == nil {
		tx.weakSet = make(map[string]struct{})
	}
	tx.weakSet[bk] = struct{}{}
	tx.weak = append(tx.weak, protocol.Key{Table: table, Row: slices.Clone(row), Column: col})
	return nil
}

// strongly reports whether observed has a strong observer of k's column.
func strongly(observed ObservedSet, k protocol.Key) bool {
	kind, ok := observed.ObservedKind(k.Table, k.Column)
	return ok && kind == Strong
}

// notifyFor returns the notify cell a prewrite of m must carry, if its
// column is strongly observed.
func (tx *Txn) notifyFor(m *mutation, primary protocol.Key) []store.Mutation {
	obs := tx.db.opts.Observed
	if obs == nil {
		return nil
	}
	if !strongly(obs, m.key) {
		return nil
	}
	tx.strong.Store(true)
	return []store.Mutation{protocol.NotifyMutation(m.key.Column, tx.startTs, primary, tx.traceCtx)}
}

// weakByWrite assigns each weak notification of the transaction to the
// first write (in ms order) on the same row, whose prewrite row transaction
// then carries it at no extra cost: extra[i] goes with ms[i]. Notifications
// on rows the transaction does not write are returned apart.
func (tx *Txn) weakByWrite(ms []*mutation, primary protocol.Key) (extra [][]store.Mutation, apart []protocol.Key) {
	extra = make([][]store.Mutation, len(ms))
	if len(tx.weak) == 0 {
		return extra, nil
	}
	type tableRow struct{ table, row string }
	first := make(map[tableRow]int, len(ms))
	for i, m := range ms {
		tr := tableRow{m.key.Table, string(m.key.Row)}
		if _, ok := first[tr]; !ok {
			first[tr] = i
		}
	}
	for _, k := range tx.weak {
		if i, ok := first[tableRow{k.Table, string(k.Row)}]; ok {
			extra[i] = append(extra[i], protocol.NotifyMutation(k.Column, tx.startTs, primary, tx.traceCtx))
		} else {
			apart = append(apart, k)
		}
	}
	return extra, apart
}

// writeWeak writes weak notifications on rows the transaction does not
// write, before its commit point, naming its primary so that they are
// removed only once the transaction's outcome is known. They are
// independent row transactions (one per row), sent together (see
// applyRows).
func (tx *Txn) writeWeak(ctx context.Context, primary protocol.Key, keys []protocol.Key) error {
	txns := weakRowTxns(tx.startTs, primary, keys, tx.traceCtx)
	if len(txns) == 0 {
		return nil
	}
	_, err := tx.db.applyRows(ctx, "weak notification", txns, nil)
	return err
}

// commitWeakOnly handles a transaction that wrote nothing but asked for weak
// notifications: they stand alone.
func (tx *Txn) commitWeakOnly(ctx context.Context) error {
	tp := traceParent(tx.span.SpanContext())
	for _, k := range tx.weak {
		if err := tx.db.notifyWeak(ctx, k.Table, k.Row, k.Column, tp); err != nil {
			return err
		}
	}
	return nil
}

// Renotify writes a standalone notification at ts at for each cell of
// rows (the form of a weak notification written outside a transaction),
// whatever its observer's kind, and hands the rows to the Notified hook.
// The notifications go to the notify locality group, so they collide
// with no transaction; a version at the snapshot the cells were read in
// is one every run of their observer settles. The writes are not synced
// but the last chunk's: the store has one ordered log.
func (db *DB) Renotify(ctx context.Context, at uint64, rows []NotifiedRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	var txns []*store.RowTxn
	cells := 0
	for _, r := range rows {
		muts := make([]store.Mutation, len(r.Columns))
		for i, c := range r.Columns {
			muts[i] = store.Mutation{Column: protocol.NotifyColumn(c), Ts: at, Value: protocol.NotifyValue(nil, nil)}
		}
		cells += len(muts)
		txns = append(txns, &store.RowTxn{Table: r.Table, Row: r.Row, Mutations: muts, NoSync: true})
	}
	for chunk := range slices.Chunk(txns, 256) {
		if len(chunk) > 0 && &chunk[len(chunk)-1] == &txns[len(txns)-1] {
			chunk[len(chunk)-1].NoSync = false
		}
		if _, err := db.st.ApplyAll(ctx, chunk); err != nil {
			return 0, fmt.Errorf("framework: renotify: %w", err)
		}
	}
	if len(rows) > MaxNotifiedRows {
		rows = nil // look everywhere
	}
	db.notified(rows)
	return cells, nil
}
