package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/internal/published"
	"github.com/trickle-dev/trickle/store"
)

// Backfilling: an observer registered on a column that already holds data
// sees only the writes made after it was published. Backfill notifies
// every cell its columns hold, as if each had just been written: a
// standalone notification per cell (the form of a weak notification
// written outside a transaction), in batches of rows read each from a
// fresh snapshot. The notifications go to the notify locality group, so
// they collide with no transaction; the observer runs as for any write.
// A strong observer runs only if the cell changed after its ack, so a
// cell it already handled (a write meanwhile, whose run came first)
// costs a read and no run. A cell written after its row was read is
// notified by its writer, since the observer was published before the
// backfill began; one deleted before its row was read is not notified:
// an observer that had seen it from the start would have undone it.
//
// Progress is recorded in the store after each batch, once its
// notifications are durable, so a backfill that stops (its process
// died, its store stopped answering) resumes after the last batch
// recorded: at worst that batch's rows are notified twice.

// backfillTable holds the progress of each observer's backfill, a row per
// observer, written outside transactions.
const backfillTable = protocol.ReservedPrefix + "backfill"

var backfillColumn = Column{Family: "b", Qualifier: "progress"}

// ErrUnknownObserver is returned by Backfill for an observer that no
// runner published: a new observer must be running (its columns
// published, so that writes notify it) before its backfill starts.
var ErrUnknownObserver = errors.New("notify: no such observer published")

// BackfillOptions configure Backfill.
type BackfillOptions struct {
	// BatchRows is how many rows one batch reads and notifies. Default:
	// 500.
	BatchRows int
	// Restart starts over, ignoring the progress of an unfinished
	// backfill of the observer. A finished one starts over anyway.
	// Default: false (resume).
	Restart bool
	// Progress, if set, is called after each batch with the progress so
	// far (the rows and cells of earlier runs of a resumed backfill
	// included).
	Progress func(BackfillProgress)
}

// BackfillProgress is where a backfill stands.
type BackfillProgress struct {
	Observer string `json:"observer"`
	Table    string `json:"table"`
	// Rows and Cells count the rows read and the cells notified so far.
	Rows  int64 `json:"rows"`
	Cells int64 `json:"cells"`
	// Next is the row the next batch starts at; nil once Done.
	Next []byte `json:"next,omitempty"`
	Done bool   `json:"done"`
	// Started is when the backfill began, Updated when its last batch was
	// recorded; Resumed tells a backfill that went on from an earlier
	// run's progress.
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	Resumed bool      `json:"-"`
}

// Backfill notifies every cell of the columns of the observer named name,
// as the runners published them, in db's store (see above), and returns
// the final progress. Notified rows are handed to db's Notified hook
// (Options.Notified) batch by batch, so that the runners run them at once.
func Backfill(ctx context.Context, fdb *framework.DB, name string, opts BackfillOptions) (BackfillProgress, error) {
	if opts.BatchRows <= 0 {
		opts.BatchRows = 500
	}
	// The runners publish observers in the engine's store whichever
	// engine runs: an observer nobody published is reported as such on
	// any engine, before the engine is asked for what only one has.
	e := (*engine.DB)(fdb).Engine()
	st := e.Store()
	ps, err := published.Load(ctx, st)
	if err != nil {
		return BackfillProgress{}, err
	}
	var table string
	var cols []Column
	var names []string
	for _, c := range ps.Columns() {
		if c.Observer == name {
			table = c.Table
			cols = append(cols, c.Column)
		}
		if len(names) == 0 || names[len(names)-1] != c.Observer {
			names = append(names, c.Observer)
		}
	}
	if len(cols) == 0 {
		return BackfillProgress{}, fmt.Errorf("%w: %q (the runners publish: %s); start a runner with it first", ErrUnknownObserver, name, strings.Join(names, ", "))
	}
	p, err := loadProgress(ctx, st, name)
	if err != nil {
		return BackfillProgress{}, err
	}
	if p == nil || p.Done || opts.Restart || p.Table != table {
		p = &BackfillProgress{Observer: name, Table: table, Started: time.Now().UTC()}
	} else {
		p.Resumed = true
	}
	for !p.Done {
		if err := backfillBatch(ctx, e, p, cols, opts.BatchRows); err != nil {
			return *p, fmt.Errorf("notify: backfill %s at row %q (%d rows, %d cells so far; run it again to resume): %w", name, p.Next, p.Rows, p.Cells, err)
		}
		if opts.Progress != nil {
			opts.Progress(*p)
		}
	}
	return *p, nil
}

// backfillBatch reads up to rows rows from p.Next in a fresh snapshot,
// notifies their cells of cols and records the progress.
func backfillBatch(ctx context.Context, e engine.Engine, p *BackfillProgress, cols []Column, rows int) error {
	var found []engine.NotifiedRow
	var next []byte
	var at uint64
	err := e.Transact(ctx, engine.TxnOptions{ReadOnly: true}, func(ctx context.Context, tx engine.Txn) error {
		found, next = found[:0], nil
		defer func() { at = tx.StartTs() }()
		for e, err := range tx.Scan(ctx, engine.ScanOptions{Table: p.Table, Start: p.Next, Columns: cols}) {
			if err != nil {
				return err
			}
			if n := len(found); n > 0 && string(found[n-1].Row) == string(e.Row) {
				found[n-1].Columns = append(found[n-1].Columns, e.Column)
				continue
			}
			if len(found) == rows {
				next = slices.Clone(e.Row)
				return nil
			}
			found = append(found, engine.NotifiedRow{Table: p.Table, Row: slices.Clone(e.Row), Columns: []Column{e.Column}})
		}
		return nil
	})
	if err != nil {
		return err
	}
	cells, err := e.Renotify(ctx, at, found)
	if err != nil {
		return err
	}
	p.Rows += int64(len(found))
	p.Cells += int64(cells)
	p.Next, p.Done, p.Updated = next, next == nil, time.Now().UTC()
	return saveProgress(ctx, e.Store(), p)
}

func loadProgress(ctx context.Context, st store.Store, observer string) (*BackfillProgress, error) {
	cells, err := st.ReadRow(ctx, backfillTable, []byte(observer), []Column{backfillColumn}, []store.Span{{MaxTs: 0, MinTs: 0, Limit: 1}})
	if err != nil || len(cells) == 0 {
		return nil, err
	}
	var p BackfillProgress
	if err := json.Unmarshal(cells[0].Value, &p); err != nil {
		return nil, fmt.Errorf("notify: backfill progress of %s: %w: %w", observer, protocol.ErrCorrupt, err)
	}
	return &p, nil
}

func saveProgress(ctx context.Context, st store.Store, p *BackfillProgress) error {
	v, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = st.Apply(ctx, &store.RowTxn{Table: backfillTable, Row: []byte(p.Observer),
		Mutations: []store.Mutation{{Column: backfillColumn, Ts: 0, Value: v}}})
	return err
}

// BackfillStatus returns the recorded progress of the observer's
// backfill, nil if none was ever run.
func BackfillStatus(ctx context.Context, st store.Store, observer string) (*BackfillProgress, error) {
	return loadProgress(ctx, st, observer)
}
