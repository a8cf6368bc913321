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

// handoverStore is the store.Store a Node hands out: it forwards to the
// store the node uses now, the owner's over NATS until this process takes
// the data directory over, its own pebble store after. Everything built on
// the node (DBs, scanners, admin commands) thus follows a takeover without
// being rebuilt; operations in flight on the old store fail as they would
// have anyway, and their callers retry.
type handoverStore struct{ cur atomic.Pointer[storeRef] }

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

// ReadRowsNow forwards to the store in use if it can choose a read's
// timestamp (the owner's, over NATS), and fails with an error matching
// errors.ErrUnsupported if not (this process's own pebble store), so that
// the caller draws one from the oracle in use.
func (h *handoverStore) ReadRowsNow(ctx context.Context, reads []store.RowRead, rel uint64) (uint64, [][]store.Cell, error) {
	nr, ok := h.get().(interface {
		ReadRowsNow(context.Context, []store.RowRead, uint64) (uint64, [][]store.Cell, error)
	})
	if !ok {
		return 0, nil, errLocalStore
	}
	return nr.ReadRowsNow(ctx, reads, rel)
}

// ChoosesTimestamps reports whether the store in use can choose
// timestamps now: never this process's own pebble store, so that the
// owner's transactions start the usual way.
func (h *handoverStore) ChoosesTimestamps() bool {
	switch st := h.get().(type) {
	case interface{ ChoosesTimestamps() bool }:
		return st.ChoosesTimestamps()
	case interface {
		ReadRowsNow(context.Context, []store.RowRead, uint64) (uint64, [][]store.Cell, error)
	}:
		return true
	}
	return false
}

// ApplyNow is ReadRowsNow's counterpart for a commit point.
func (h *handoverStore) ApplyNow(ctx context.Context, txn *store.RowTxn, rel uint64) (uint64, store.RowResult, error) {
	na, ok := h.get().(interface {
		ApplyNow(context.Context, *store.RowTxn, uint64) (uint64, store.RowResult, error)
	})
	if !ok {
		return 0, store.RowResult{FailedCheck: -1}, errLocalStore
	}
	return na.ApplyNow(ctx, txn, rel)
}

// errLocalStore is ReadRowsNow's (and ApplyNow's) answer on the owner's own store, made
// once: the owner's read-only transactions meet it every time.
var errLocalStore = fmt.Errorf("runner: the store in use reads at the timestamps it is given: %w", errors.ErrUnsupported)

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

// Close does nothing: the Node closes the stores behind it.
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
