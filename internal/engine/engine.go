// Package engine is the seam between the framework and a transaction
// engine. The front (framework.DB and Txn), the observer runtime
// (framework/notify) and the scanner reach transactions and notifications
// only through the interfaces here, so that an engine other than the one
// over a store.Store (internal/percolator) plugs in without touching them:
// one that makes framework transactions the store's own, for instance.
//
// Nothing here does I/O; the engines do. The front holds an engine through
// the handles DB and Tx, which framework.DB and framework.Txn are defined
// as, so that the packages that open an engine or reach the one behind a
// front DB convert between them without the front exporting either.
package engine

import (
	"context"
	"fmt"
	"iter"
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/trickle-dev/trickle/store"
)

// Column names a column as family:qualifier.
type Column = store.Column

// Kind says what makes an observer run.
type Kind uint8

const (
	// Strong observers run after a transaction writes an observed column.
	// Each observed change makes at most one observer transaction commit
	// (runs collide on the observer's claim, see Notifications.Claim), and
	// several changes made before a run collapse into that one run.
	Strong Kind = iota + 1
	// Weak observers run when someone asks, through NotifyWeak, and may
	// run more than once per request. Writing a weak column notifies
	// nobody.
	Weak
)

func (k Kind) String() string {
	switch k {
	case Strong:
		return "strong"
	case Weak:
		return "weak"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Engine runs snapshot-isolation transactions and keeps the notifications
// their writes leave. It is safe for concurrent use.
type Engine interface {
	// Transact runs fn in one transaction as o says, committing it if it
	// is read-write and fn returns nil. A read-write transaction that
	// conflicts is run again at a new snapshot (fn reads everything
	// again), as the engine's retry policy allows.
	Transact(ctx context.Context, o TxnOptions, fn func(context.Context, Txn) error) error
	// NotifyWeak asks the weak observer of (table, col) to look at row,
	// outside any transaction; durable when it returns.
	NotifyWeak(ctx context.Context, table string, row []byte, col Column) error
	// ObservedKind reports whether a write of (table, col) notifies an
	// observer, and of which kind.
	ObservedKind(table string, col Column) (Kind, bool)
	// Setup returns what the engine was opened with that the code around
	// it shares: the observer runtime names its worker, logs, traces and
	// counts as the engine does.
	Setup() Setup
	// Store is where the framework keeps what is not transactional data:
	// failure records, published observers, backfill progress.
	Store() store.Store
	// SafePoint is the garbage collection safe point the engine knows:
	// snapshots at or above it are complete.
	SafePoint() uint64
	Notifications
	Collector
	Bulk
}

// Setup is the identity and telemetry an engine was opened with.
type Setup struct {
	WorkerID       string
	Logger         *slog.Logger
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// TxnOptions say which transaction Transact runs.
type TxnOptions struct {
	// ReadOnly transactions refuse writes and commit nothing.
	ReadOnly bool
	// At, if not 0, is the snapshot of a read-only transaction: the store
	// as of that timestamp, for reading the past. The engine refuses one
	// below what it still keeps or above what it has handed out.
	At uint64
}

// Txn is a transaction: it reads its snapshot plus its own writes, which
// it buffers until the engine commits it. It is not safe for concurrent
// use.
type Txn interface {
	// Get returns the cell's value, or an error matching the engine's
	// not-found error.
	Get(ctx context.Context, table string, row []byte, col Column) ([]byte, error)
	// GetRows reads cols of each of rows in as few round trips as the
	// engine can; absent cells are absent from the maps.
	GetRows(ctx context.Context, table string, rows [][]byte, cols []Column) (map[string]map[Column][]byte, error)
	// Scan yields the cells o selects, in row then column order, merged
	// with the transaction's own writes.
	Scan(ctx context.Context, o ScanOptions) iter.Seq2[Entry, error]
	// Set and Delete buffer a write.
	Set(table string, row []byte, col Column, value []byte) error
	Delete(table string, row []byte, col Column) error
	// NotifyWeak asks the weak observer of (table, col) to look at row
	// once the transaction commits.
	NotifyWeak(table string, row []byte, col Column) error
	// StartTs is the transaction's snapshot timestamp.
	StartTs() uint64
}

// ScanOptions select the cells a scan returns.
type ScanOptions struct {
	Table string
	// Start (inclusive) and End (exclusive) bound the rows; nil means
	// unbounded. Ignored when Prefix is set.
	Start, End []byte
	// Prefix, if set, selects the rows that start with it.
	Prefix []byte
	// Families and Columns restrict the columns; both empty means all.
	Families []string
	Columns  []Column
	// After, if set, resumes the scan after this cell: the cells of rows
	// before After.Row, and those of After.Row up to After.Column
	// included, are skipped without being read, so that a scan resuming
	// where an earlier one stopped does not step over them again.
	After *Position
}

// Position is a cell of a table: a row and a column.
type Position = store.Position

// Entry is one cell returned by a scan.
type Entry struct {
	Row    []byte
	Column Column
	Value  []byte
}

// InstrumentationName names the tracer and meter of the framework.
//
// The engine over a store's transactions and the observer runtime share
// it, so that one name covers a framework transaction and the runs of
// the observers it notifies.
const InstrumentationName = "github.com/trickle-dev/trickle/framework"
