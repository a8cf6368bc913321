// Package store is the Bigtable-like substrate under the transaction layer:
// a sorted map keyed by (table, row, column, timestamp) with single-row
// atomic read-modify-write, ordered scans and locality groups.
//
// The store knows nothing about transactions. Everything the Percolator
// protocol needs from it is expressed as data (a RowTxn: checks plus
// mutations on one row, evaluated and applied as one operation), so the same
// request can be executed in-process against pebble or shipped to another
// process that owns the store.
package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
)

// Column names a column as family:qualifier. Both parts are arbitrary bytes
// (Go strings may hold any bytes). The family decides the locality group.
type Column struct {
	Family    string
	Qualifier string
}

// String renders the column as family:qualifier for messages and debugging.
func (c Column) String() string { return c.Family + ":" + c.Qualifier }

// Cell is one version of one column of one row.
type Cell struct {
	Row    []byte
	Column Column
	// Ts orders versions of a column: higher is newer. Within a column,
	// versions come out newest first.
	Ts    uint64
	Value []byte
}

// Span selects versions of a column: those with MinTs <= Ts <= MaxTs, newest
// first, at most Limit of them (0 means no limit). Spans are how callers read
// "the newest version at or below a timestamp" in one store operation.
type Span struct {
	MaxTs uint64
	MinTs uint64
	Limit int
}

// AllVersions is the span that selects every version of a column.
var AllVersions = Span{MaxTs: ^uint64(0)}

// ColumnFilter restricts reads and scans to some columns. A zero filter
// matches every column of the locality group being read.
type ColumnFilter struct {
	// Families matches every column of these families.
	Families []string
	// Columns matches these exact columns.
	Columns []Column
}

// Position names a column of a row; scans resume strictly after it.
type Position struct {
	Row    []byte
	Column Column
}

// ScanRequest describes an ordered scan over one table and one locality
// group. Rows come out in ascending byte order, columns in ascending
// (family, qualifier) order within a row, versions newest first.
type ScanRequest struct {
	Table string
	// Group is the locality group to scan; "" means DefaultGroup. A scan never
	// reads keys of any other group.
	Group string
	// Start is the first row (inclusive); nil means the beginning of the table.
	Start []byte
	// End is the row bound (exclusive); nil means the end of the table.
	End []byte
	// Filter restricts the columns returned. Every family named in it must
	// belong to Group.
	Filter ColumnFilter
	// Spans select versions of each column; cells matching any span are
	// returned (spans are applied in order and must not overlap). Nil means
	// AllVersions.
	Spans []Span
	// After, if set, resumes the scan after this column of this row (used for
	// paging and for resuming a scan elsewhere).
	After *Position
}

// RowRead is one row of a ReadRows call: the arguments of a ReadRow. Each
// read names its own table, columns and spans, so one call can gather rows
// of several tables, as a transaction reading a data cell in one table and
// an index entry in another does.
type RowRead struct {
	Table string
	Row   []byte
	// Columns are read in this order, newest version first within each;
	// all must belong to one locality group. None reads nothing.
	Columns []Column
	// Spans select the versions of every column; nil means AllVersions.
	// They must not overlap.
	Spans []Span
}

// MaxRowReads is how many reads one ReadRows call may carry. It bounds the
// work one call does before its caller sees anything, and the size of a
// request sent to a store in another process; a caller with more rows
// splits them over several calls.
const MaxRowReads = 1024

// Presence says whether a Check wants matching cells to exist or not.
type Presence uint8

const (
	// MustBeAbsent fails the check if any cell matches.
	MustBeAbsent Presence = iota
	// MustExist fails the check if no cell matches.
	MustExist
)

// Check is one condition of a row transaction: do versions of Column with
// MinTs <= Ts <= MaxTs (and, if ValuePrefix is non-nil, a value starting with
// it) exist?
type Check struct {
	Column      Column
	MinTs       uint64
	MaxTs       uint64
	ValuePrefix []byte
	Expect      Presence
}

// Mutation writes or deletes one exact version of a column.
type Mutation struct {
	Column Column
	Ts     uint64
	// Value is written unless Delete is set.
	Value []byte
	// Delete removes the version (Column, Ts) if present.
	Delete bool
	// SingleDelete, with Delete, promises that the version was written at
	// most once since it was last deleted (or ever): no write replaced
	// it. The store may then drop the write and the delete together as
	// soon as they meet, instead of keeping a tombstone until it reaches
	// the bottom of its LSM (pebble's SingleDelete). A broken promise may
	// bring an older value of the version back, so use it only for
	// versions whose every write checks that they are absent (a
	// transaction's secondary locks). Stores without such a delete treat
	// it as Delete. Only valid with Delete.
	SingleDelete bool
	// IfValuePrefix, if non-nil, makes the mutation conditional: it is
	// applied only if the version (Column, Ts) exists and its value starts
	// with IfValuePrefix, and skipped otherwise (which is not a failure). It
	// lets a row transaction remove a cell only if it is still "ours", e.g. a
	// lock kept at a fixed version whose value names its owner.
	IfValuePrefix []byte
}

// RowTxn is a single-row atomic read-modify-write: all Checks are evaluated
// against the row's current state and, only if every one holds, all Mutations
// are applied. Row transactions on the same row serialize; on different rows
// they run in parallel. This is Bigtable's conditional mutation and the only
// primitive the transaction protocol needs for its commit point.
type RowTxn struct {
	Table     string
	Row       []byte
	Checks    []Check
	Mutations []Mutation
	// NoSync lets Apply return before the write is on stable storage. Such a
	// write is still ordered: it becomes durable no later than the next
	// synced write of the same store. The zero value (synced) is the safe
	// default.
	NoSync bool
	// Snapshot, if not 0, is the start timestamp of the transaction the
	// row transaction writes for (a prewrite, a one-phase commit, a commit
	// point). A store with a safe point (Options.SafePoint) refuses it,
	// before its checks and with an error matching ErrSnapshotTooOld, if
	// Snapshot is below the safe point when it runs: a collection may have
	// removed versions the transaction read, or the ones its checks would
	// find (a concurrent delete), so it must not commit. The check runs
	// under the row's latch, so a collection that raises the safe point
	// later deletes nothing of the row before the write. 0 asks for no
	// check (a resolver's rollback of an old transaction must pass).
	Snapshot uint64
}

// RowResult reports the outcome of a RowTxn.
type RowResult struct {
	// Applied is true when all checks held and the mutations were applied.
	Applied bool
	// FailedCheck is the index of the first check that did not hold, or -1.
	FailedCheck int
	// Conflict is, for a failed MustBeAbsent check, the newest cell that
	// matched it (so the caller learns, e.g., which lock is in the way).
	Conflict *Cell
}

// Store is the interface the transaction layer, scanners and tools use. It is
// implemented by the pebble-backed store in this package and by clients that
// reach a store owned by another process.
type Store interface {
	// ReadRow returns the versions of each column in cols that the spans
	// select, grouped by column in the order of cols, newest first within a
	// column. All columns must belong to one locality group.
	ReadRow(ctx context.Context, table string, row []byte, cols []Column, spans []Span) ([]Cell, error)
	// ReadRows reads several rows, possibly of different tables, in one
	// operation: result i holds what ReadRow would return for reads[i].
	// A store reached over a network carries the call as one request,
	// so N rows cost one round trip instead of N. Every read is
	// validated before any is executed, and a bad one fails the whole
	// call with an *InvalidError naming it (reads[3].Columns[0]). At
	// most MaxRowReads reads fit in one call; an empty call is valid
	// and returns no results. Whether the rows are read from one
	// snapshot is up to the implementation (the pebble store's are).
	ReadRows(ctx context.Context, reads []RowRead) ([][]Cell, error)
	// Scan returns cells in key order; see ScanRequest. The sequence stops at
	// the first error, which it yields.
	Scan(ctx context.Context, req ScanRequest) iter.Seq2[Cell, error]
	// Apply executes a row transaction atomically.
	Apply(ctx context.Context, txn *RowTxn) (RowResult, error)
	// ApplyAll executes several row transactions on distinct rows, each
	// atomically and each with its own checks and result, as one operation:
	// one round trip to a remote store, one write (and at most one sync) to
	// a local one. It is how a transaction prewrites or commits many rows
	// at the cost of one. Results are in request order; a failed check of
	// one row transaction does not stop the others. At most MaxApplyAll
	// row transactions, no two on the same row. Every row transaction is
	// validated before any runs, and a bad one (or a nil one, reported
	// first) fails the whole call with an *InvalidError naming it
	// (txns[2].Checks[0].Expect); an empty call is valid and returns no
	// results.
	ApplyAll(ctx context.Context, txns []*RowTxn) ([]RowResult, error)
	// Tables lists the tables that have at least one cell in group.
	Tables(ctx context.Context, group string) ([]string, error)
	// Close releases the store.
	Close() error
}

// DefaultGroup is the locality group of every family the store's options
// do not map elsewhere.
const DefaultGroup = "default"

// Errors returned by stores. Use errors.Is.
var (
	// ErrClosed is returned by operations on a closed store.
	ErrClosed = errors.New("store: closed")
	// ErrInvalid is wrapped by every error about a malformed request.
	ErrInvalid = errors.New("store: invalid request")
	// ErrUnavailable is matched by errors of stores reached over a network
	// when the store did not answer: nothing serves it, the connection is
	// down, or no answer came within the deadline. The operation may or
	// may not have been applied (an Apply whose answer was lost), so a
	// caller retries only what is safe to repeat. Callers use it to tell a
	// peer that is gone from a request that is wrong.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrNoTimestamp is wrapped by the error of a write that failed before
	// its timestamp was drawn, or because it could not be (ApplyAtomic's
	// clock failed, or a store service's oracle did): nothing was
	// written. A store reached over a network says so too, so that a
	// committer can tell this failure, after which its transaction
	// certainly did not commit, from a lost answer.
	ErrNoTimestamp = errors.New("store: no timestamp")
)

// InvalidError describes what was wrong with a request and where.
type InvalidError struct {
	Op     string // the operation, e.g. "Apply"
	Field  string // the offending field, e.g. "Mutations[2].Column"
	Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("store: %s: invalid %s: %s", e.Op, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true for every InvalidError.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }
