package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// pendingRows are the rows of the ApplyAtomic calls in flight between
// the moment they draw their commit timestamp and the moment their write
// is visible. A one-phase commit leaves no lock for a reader to find:
// a snapshot later than its commit timestamp would read the rows as they
// were before it, and see the commit only in part or not at all. So every
// read first waits for the pending writes of the rows it reads.
//
// A row is registered before its commit timestamp is drawn. A reader
// whose snapshot is later than that timestamp drew its own after it, and
// reads after that: it finds the row registered, or already written. A
// reader that finds nothing pending is earlier, or the write is visible.
// Readers of other rows never wait, and the fast path of a read is one
// atomic load while nothing is pending.
type pendingRows struct {
	n    atomic.Int64 // registered rows
	mu   sync.RWMutex
	rows map[rowKey]chan struct{} // closed when the write is visible
	// found, set only by tests, is called with the number of pending
	// writes a wait found, before it waits for them.
	found func(n int)
}

// add registers the rows of txns, which the caller has latched, and
// returns the function that removes them once their write is visible or
// will not happen.
func (p *pendingRows) add(txns []*RowTxn) (done func()) {
	written := make(chan struct{})
	p.mu.Lock()
	if p.rows == nil {
		p.rows = make(map[rowKey]chan struct{})
	}
	for _, txn := range txns {
		p.rows[rowKey{txn.Table, string(txn.Row)}] = written
	}
	p.n.Add(int64(len(txns)))
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		for _, txn := range txns {
			delete(p.rows, rowKey{txn.Table, string(txn.Row)})
		}
		p.n.Add(-int64(len(txns)))
		p.mu.Unlock()
		close(written)
	}
}

// waitRow returns once the write pending on (table, row) when it is
// called, if any, is visible, or ctx ends. A write that registers later
// draws a timestamp later than the caller's snapshot, so the caller need
// not see it; waiting only for the one found keeps a read of a busy row
// from waiting for ever.
func (p *pendingRows) waitRow(ctx context.Context, table string, row []byte) error {
	if p.n.Load() == 0 {
		return nil
	}
	p.mu.RLock()
	written := p.rows[rowKey{table, string(row)}]
	p.mu.RUnlock()
	if written == nil {
		return nil
	}
	return wait(ctx, written, table, row)
}

// waitReads is waitRow for the row of each of reads.
func (p *pendingRows) waitReads(ctx context.Context, reads []RowRead) error {
	for i := range reads {
		if err := p.waitRow(ctx, reads[i].Table, reads[i].Row); err != nil {
			return err
		}
	}
	return nil
}

// waitRange is waitRow for the rows of table in [start, end) (nil bounds
// are open): it waits for the writes pending on any of them when it is
// called.
func (p *pendingRows) waitRange(ctx context.Context, table string, start, end []byte) error {
	if p.n.Load() == 0 {
		return nil
	}
	type found struct {
		written chan struct{}
		row     string
	}
	var waits []found
	p.mu.RLock()
	for k, ch := range p.rows {
		if k.table == table && (start == nil || k.row >= string(start)) && (end == nil || k.row < string(end)) {
			waits = append(waits, found{ch, k.row})
		}
	}
	p.mu.RUnlock()
	if p.found != nil {
		p.found(len(waits))
	}
	for _, w := range waits {
		if err := wait(ctx, w.written, table, []byte(w.row)); err != nil {
			return err
		}
	}
	return nil
}

// wait waits for a pending write of (table, row) to become visible.
func wait(ctx context.Context, written <-chan struct{}, table string, row []byte) error {
	select {
	case <-written:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("store: waiting for the atomic write of %s/%q to become visible: %w", table, row, ctx.Err())
	}
}
