package runner

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/store"
)

// handover is the store and the oracle a node on the data directory's
// pebble store hands out, owner or client: a takeover moves both to the
// new owner's (see clientSetup.handOver).
type handover struct {
	st *handoverStore
	or *handoverOracle
}

func newHandover(st store.Store, or framework.Oracle) handover {
	return handover{newHandoverStore(st), newHandoverOracle(or)}
}

func (h handover) store() store.Store       { return h.st }
func (h handover) oracle() framework.Oracle { return h.or }

// set moves the store and the oracle handed out to st and or.
func (h handover) set(st store.Store, or framework.Oracle) {
	h.st.set(st)
	h.or.set(or)
}

// handoverStore is the store.Store a Node hands out: it forwards to the
// store the node uses now, the owner's over NATS until this process takes
// the data directory over, its own pebble store after. Everything built on
// the node (DBs, scanners, admin commands) thus follows a takeover without
// being rebuilt; operations in flight on the old store fail as they would
// have anyway, and their callers retry.
type handoverStore struct{ cur atomic.Pointer[storeRef] }

// The handover store offers every capability, and forwards each to the
// store in use if it has it (errors.ErrUnsupported if not).
var (
	_ store.Store            = (*handoverStore)(nil)
	_ store.AtomicApplier    = (*handoverStore)(nil)
	_ store.Ingester         = (*handoverStore)(nil)
	_ store.TableCompacter   = (*handoverStore)(nil)
	_ store.TimestampReader  = (*handoverStore)(nil)
	_ store.TimestampApplier = (*handoverStore)(nil)
	_ store.TimestampChooser = (*handoverStore)(nil)
)

type storeRef struct{ store.Store }

func newHandoverStore(st store.Store) *handoverStore {
	h := &handoverStore{}
	h.set(st)
	return h
}

func (h *handoverStore) set(st store.Store) { h.cur.Store(&storeRef{st}) }
func (h *handoverStore) get() store.Store   { return h.cur.Load().Store }

func (h *handoverStore) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	return h.get().ReadRow(ctx, table, row, cols, spans)
}

func (h *handoverStore) ReadRows(ctx context.Context, reads []store.RowRead) ([][]store.Cell, error) {
	return h.get().ReadRows(ctx, reads)
}

// timestampStore is a store that can choose timestamps: the owner's,
// over NATS (remote.StoreClient).
type timestampStore interface {
	store.TimestampReader
	store.TimestampApplier
	store.TimestampChooser
}

// ChoosesTimestamps reports whether the store in use can choose
// timestamps now: never this process's own pebble store, so that the
// owner's transactions start and commit the usual way.
func (h *handoverStore) ChoosesTimestamps() bool {
	st, ok := h.get().(timestampStore)
	return ok && st.ChoosesTimestamps()
}

// ReadRowsNow forwards to the store in use if it can choose a read's
// timestamp, and fails with an error matching errors.ErrUnsupported if not
// (a takeover between ChoosesTimestamps and the call), so that the caller
// draws one from the oracle in use.
func (h *handoverStore) ReadRowsNow(ctx context.Context, reads []store.RowRead, rel uint64) (uint64, [][]store.Cell, error) {
	st, ok := h.get().(timestampStore)
	if !ok {
		return 0, nil, errLocalStore
	}
	return st.ReadRowsNow(ctx, reads, rel)
}

// ApplyNow is ReadRowsNow's counterpart for a commit point.
func (h *handoverStore) ApplyNow(ctx context.Context, txn *store.RowTxn, rel uint64) (uint64, store.RowResult, error) {
	st, ok := h.get().(timestampStore)
	if !ok {
		return 0, store.RowResult{FailedCheck: -1}, errLocalStore
	}
	return st.ApplyNow(ctx, txn, rel)
}

// ApplyAtomic forwards to the store in use, so that transactions commit in
// one phase, and fails with an error matching errors.ErrUnsupported,
// having sent nothing, if that store cannot, so that the caller commits in
// two phases.
func (h *handoverStore) ApplyAtomic(ctx context.Context, txns []*store.RowTxn, rel []int, clock store.Clock) (uint64, []store.RowResult, error) {
	st, ok := h.get().(store.AtomicApplier)
	if !ok {
		return 0, nil, errNoAtomicStore
	}
	return st.ApplyAtomic(ctx, txns, rel, clock)
}

// errNoAtomicStore is ApplyAtomic's answer on a store that cannot.
var errNoAtomicStore = fmt.Errorf("runner: the store in use cannot write row transactions atomically: %w", errors.ErrUnsupported)

// errLocalStore is ReadRowsNow's and ApplyNow's answer on this process's
// own store.
var errLocalStore = fmt.Errorf("runner: the store in use takes the timestamps it is given: %w", errors.ErrUnsupported)

// Ingest forwards to the store in use, and fails with an error matching
// errors.ErrUnsupported, having written nothing, if that store cannot, so
// that the caller (an import) writes with ApplyAll.
func (h *handoverStore) Ingest(ctx context.Context, txns []*store.RowTxn) error {
	st, ok := h.get().(store.Ingester)
	if !ok {
		return errNoIngestStore
	}
	return st.Ingest(ctx, txns)
}

// errNoIngestStore is Ingest's answer on a store that cannot.
var errNoIngestStore = fmt.Errorf("runner: the store in use cannot ingest sstables: %w", errors.ErrUnsupported)

// CompactTable forwards to the store in use, and fails with an error
// matching errors.ErrUnsupported if that store cannot (the owner's over
// NATS), so that a collection leaves compacting to the owner's store.
func (h *handoverStore) CompactTable(ctx context.Context, group, table string) error {
	st, ok := h.get().(store.TableCompacter)
	if !ok {
		return errNoCompactStore
	}
	return st.CompactTable(ctx, group, table)
}

// errNoCompactStore is CompactTable's answer on a store that cannot.
var errNoCompactStore = fmt.Errorf("runner: the store in use cannot compact tables: %w", errors.ErrUnsupported)

func (h *handoverStore) Scan(ctx context.Context, req store.ScanRequest) iter.Seq2[store.Cell, error] {
	return h.get().Scan(ctx, req)
}

func (h *handoverStore) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	return h.get().Apply(ctx, txn)
}

func (h *handoverStore) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	return h.get().ApplyAll(ctx, txns)
}

func (h *handoverStore) Tables(ctx context.Context, group string) ([]string, error) {
	return h.get().Tables(ctx, group)
}

// Close does nothing: the node's setup closes the stores behind it.
func (h *handoverStore) Close() error { return nil }

// handoverOracle is handoverStore's counterpart for timestamps. The owner's
// oracle persisted the top of every range it served from, and a new owner
// starts above it, so timestamps stay increasing across a takeover.
type handoverOracle struct{ cur atomic.Pointer[oracleRef] }

type oracleRef struct{ framework.Oracle }

func newHandoverOracle(o framework.Oracle) *handoverOracle {
	h := &handoverOracle{}
	h.set(o)
	return h
}

func (h *handoverOracle) set(o framework.Oracle) { h.cur.Store(&oracleRef{o}) }

func (h *handoverOracle) Timestamp(ctx context.Context) (uint64, error) {
	return h.cur.Load().Timestamp(ctx)
}
