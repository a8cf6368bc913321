package main

import (
	"context"
	"errors"
	"iter"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

var (
	_ store.AtomicApplier = (*ownerView)(nil)
	_ store.AtomicApplier = (*paused)(nil)
	_ store.AtomicApplier = staleReads{}
)

// errOwnerGone is what a client's call gets when the owner died before
// answering, or while no owner serves the store.
var errOwnerGone = errors.Join(store.ErrUnavailable, errors.New("sicheck: the owner died before answering"))

// ownerView is the clients' view of a store an owner serves: calls go to
// the store it serves now; one whose owner died while it was under way
// fails with store.ErrUnavailable, as an answer that never came back
// would, and so does one while no owner serves (down).
type ownerView struct {
	mu  sync.Mutex
	cur store.Store
	gen int
}

func (v *ownerView) serve(st store.Store) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.cur, v.gen = st, v.gen+1
}

// down ends the current owner: its answers from now on are lost.
func (v *ownerView) down() store.Store {
	v.mu.Lock()
	defer v.mu.Unlock()
	old := v.cur
	v.cur, v.gen = nil, v.gen+1
	return old
}

func (v *ownerView) get() (store.Store, int, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.cur == nil {
		return nil, v.gen, errOwnerGone
	}
	return v.cur, v.gen, nil
}

// answer returns err, or errOwnerGone if the owner that call gen went to
// died since.
func (v *ownerView) answer(gen int, err error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen != gen {
		return errOwnerGone
	}
	return err
}

func (v *ownerView) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	st, gen, err := v.get()
	if err != nil {
		return nil, err
	}
	cells, err := st.ReadRow(ctx, table, row, cols, spans)
	if err = v.answer(gen, err); err != nil {
		return nil, err
	}
	return cells, nil
}

func (v *ownerView) ReadRows(ctx context.Context, reads []store.RowRead) ([][]store.Cell, error) {
	st, gen, err := v.get()
	if err != nil {
		return nil, err
	}
	res, err := st.ReadRows(ctx, reads)
	if err = v.answer(gen, err); err != nil {
		return nil, err
	}
	return res, nil
}

// Scan yields what the owner's store yields, and ends with errOwnerGone
// if the owner dies while it runs.
func (v *ownerView) Scan(ctx context.Context, req store.ScanRequest) iter.Seq2[store.Cell, error] {
	return func(yield func(store.Cell, error) bool) {
		st, gen, err := v.get()
		if err != nil {
			yield(store.Cell{}, err)
			return
		}
		for c, err := range st.Scan(ctx, req) {
			if err = v.answer(gen, err); err != nil {
				yield(store.Cell{}, err)
				return
			}
			if !yield(c, nil) {
				return
			}
		}
	}
}

func (v *ownerView) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	st, gen, err := v.get()
	if err != nil {
		return store.RowResult{FailedCheck: -1}, err
	}
	res, err := st.Apply(ctx, txn)
	if err = v.answer(gen, err); err != nil {
		return store.RowResult{FailedCheck: -1}, err
	}
	return res, nil
}

func (v *ownerView) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	st, gen, err := v.get()
	if err != nil {
		return nil, err
	}
	res, err := st.ApplyAll(ctx, txns)
	if err = v.answer(gen, err); err != nil {
		return nil, err
	}
	return res, nil
}

// ApplyAtomic lets the clients commit in one phase through the owner's
// store (as a store service does), or says it cannot.
func (v *ownerView) ApplyAtomic(ctx context.Context, txns []*store.RowTxn, rel []int, clock store.Clock) (uint64, []store.RowResult, error) {
	st, gen, err := v.get()
	if err != nil {
		return 0, nil, err
	}
	a, ok := st.(store.AtomicApplier)
	if !ok {
		return 0, nil, errors.ErrUnsupported
	}
	ts, res, err := a.ApplyAtomic(ctx, txns, rel, clock)
	if err = v.answer(gen, err); err != nil {
		return 0, nil, err
	}
	return ts, res, nil
}

func (v *ownerView) Tables(ctx context.Context, group string) ([]string, error) {
	st, gen, err := v.get()
	if err != nil {
		return nil, err
	}
	tables, err := st.Tables(ctx, group)
	if err = v.answer(gen, err); err != nil {
		return nil, err
	}
	return tables, nil
}

func (v *ownerView) Close() error { return nil }

// paused is a client process's view of the store: while the process is
// paused (SIGSTOP, or starved), its calls wait at its gate, and the
// transactions it runs stand still wherever they were. Its reads trip the
// gate (see gate.trip).
type paused struct {
	store.Store
	gate
}

func (p *paused) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	p.trip()
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	return p.Store.ReadRow(ctx, table, row, cols, spans)
}

func (p *paused) ReadRows(ctx context.Context, reads []store.RowRead) ([][]store.Cell, error) {
	p.trip()
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	return p.Store.ReadRows(ctx, reads)
}

func (p *paused) Scan(ctx context.Context, req store.ScanRequest) iter.Seq2[store.Cell, error] {
	return func(yield func(store.Cell, error) bool) {
		p.trip()
		if err := p.wait(ctx); err != nil {
			yield(store.Cell{}, err)
			return
		}
		for c, err := range p.Store.Scan(ctx, req) {
			if !yield(c, err) {
				return
			}
		}
	}
}

func (p *paused) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	if err := p.wait(ctx); err != nil {
		return store.RowResult{FailedCheck: -1}, err
	}
	return p.Store.Apply(ctx, txn)
}

func (p *paused) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	return p.Store.ApplyAll(ctx, txns)
}

func (p *paused) ApplyAtomic(ctx context.Context, txns []*store.RowTxn, rel []int, clock store.Clock) (uint64, []store.RowResult, error) {
	if err := p.wait(ctx); err != nil {
		return 0, nil, err
	}
	a, ok := p.Store.(store.AtomicApplier)
	if !ok {
		return 0, nil, errors.ErrUnsupported
	}
	return a.ApplyAtomic(ctx, txns, rel, clock)
}

// staleReads is a broken store, for the check's own test: one read in
// five answers from a snapshot 50ms older than the one asked for (every
// span selecting a newest version below a bound gets a lower bound).
type staleReads struct{ store.Store }

func (s staleReads) stale(spans []store.Span) []store.Span {
	if rand.IntN(5) != 0 {
		return spans
	}
	out := slices.Clone(spans)
	const older = 50 << oracle.LogicalBits // 50ms of the oracle's clock
	for i := range out {
		if sp := &out[i]; sp.Limit == 1 && sp.MaxTs > sp.MinTs+older {
			sp.MaxTs -= older
		}
	}
	return out
}

func (s staleReads) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	return s.Store.ReadRow(ctx, table, row, cols, s.stale(spans))
}

func (s staleReads) ReadRows(ctx context.Context, reads []store.RowRead) ([][]store.Cell, error) {
	reads = slices.Clone(reads)
	for i := range reads {
		reads[i].Spans = s.stale(reads[i].Spans)
	}
	return s.Store.ReadRows(ctx, reads)
}

func (s staleReads) ApplyAtomic(ctx context.Context, txns []*store.RowTxn, rel []int, clock store.Clock) (uint64, []store.RowResult, error) {
	a, ok := s.Store.(store.AtomicApplier)
	if !ok {
		return 0, nil, errors.ErrUnsupported
	}
	return a.ApplyAtomic(ctx, txns, rel, clock)
}
