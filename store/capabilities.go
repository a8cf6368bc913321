package store

import "context"

// The optional capabilities of a Store. Callers find them by type
// assertion and fall back to the plain Store methods when a store lacks
// one, or when it answers with an error matching errors.ErrUnsupported
// (a store that forwards to another that cannot, now). They are declared
// here once, for every store and every caller: each store asserts the ones
// it has (var _ store.AtomicApplier = (*DB)(nil)), so that a signature
// that drifts breaks the build instead of silently turning a capability
// off, and storetest runs each capability's cases on every store that
// claims it.

// AtomicApplier writes several row transactions all or none at a
// timestamp it draws (DB.ApplyAtomic): what a one-phase commit needs.
type AtomicApplier interface {
	ApplyAtomic(ctx context.Context, txns []*RowTxn, rel []int, clock Clock) (uint64, []RowResult, error)
}

// Ingester links row transactions of plain writes into the store in bulk,
// bypassing its write path (DB.Ingest): what an import of committed
// versions needs.
type Ingester interface {
	Ingest(ctx context.Context, txns []*RowTxn) error
}

// TableCompacter compacts one table's keys of a locality group
// (DB.CompactTable), so that reads stop stepping over what a collection
// deleted.
type TableCompacter interface {
	CompactTable(ctx context.Context, group, table string) error
}

// TimestampReader is a store that serves a read at a timestamp it draws
// itself, from the oracle every reader uses (a store service with the
// oracle beside it): a transaction then gets its snapshot with its first
// read, saving the oracle's round trip. ReadRowsNow is ReadRows at that
// timestamp, added to the span bounds rel marks (bit j: span j of every
// read), and returned with the results.
type TimestampReader interface {
	ReadRowsNow(ctx context.Context, reads []RowRead, rel uint64) (uint64, [][]Cell, error)
}

// TimestampApplier is TimestampReader's counterpart for a commit point:
// ApplyNow is Apply at a timestamp the store draws, added to the
// mutations rel marks (bit i: mutation i), and returned with the result.
type TimestampApplier interface {
	ApplyNow(ctx context.Context, txn *RowTxn, rel uint64) (uint64, RowResult, error)
}

// TimestampChooser tells whether a store that can draw timestamps
// (TimestampReader, TimestampApplier) can now: one that forwards to
// another that may change (a runner's, across a takeover) says no while
// it cannot, so that transactions do not make the attempt. A store
// without it is asked whenever it has the methods.
type TimestampChooser interface {
	ChoosesTimestamps() bool
}

var (
	_ AtomicApplier  = (*DB)(nil)
	_ Ingester       = (*DB)(nil)
	_ TableCompacter = (*DB)(nil)
)
