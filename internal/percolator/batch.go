package percolator

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// maxApplyBytes bounds the approximate encoded size of one ApplyAll, so
// that a transaction writing large values across many rows sends several
// moderate requests rather than one huge one.
const maxApplyBytes = 4 << 20

// applyRows runs row transactions on distinct rows and returns their
// results in order. They go to the store in chunks of at most
// Options.RowsPerApply rows (and about maxApplyBytes), one ApplyAll each,
// up to CommitConcurrency chunks at a time: a transaction touching 200
// rows costs one store batch, not 200. done, if not nil, is called with
// the index of each row transaction as soon as its chunk returned; an
// error from it stops further chunks and is returned as it is. A store
// error is returned wrapped in what the rows were for (e.g. "prewrite").
func (db *DB) applyRows(ctx context.Context, what string, txns []*store.RowTxn, done func(i int, res store.RowResult) error) ([]store.RowResult, error) {
	if len(txns) == 0 {
		return nil, nil
	}
	results := make([]store.RowResult, len(txns))
	chunks := db.chunk(txns)
	if len(chunks) == 1 { // the common case: no goroutine
		return results, db.applyChunk(ctx, what, txns, results, chunks[0], done)
	}
	sem := make(chan struct{}, db.opts.CommitConcurrency)
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return firstErr != nil }
	for _, c := range chunks {
		if failed() {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if failed() {
				return
			}
			if err := db.applyChunk(ctx, what, txns, results, c, done); err != nil {
				mu.Lock()
				if firstErr == nil || (errors.Is(err, ErrCrashed) && !errors.Is(firstErr, ErrCrashed)) {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return results, firstErr
}

// span is a chunk of row transactions: txns[from:to].
type span struct{ from, to int }

// chunk splits txns into the runs applyRows sends in one ApplyAll each.
func (db *DB) chunk(txns []*store.RowTxn) []span {
	limit := db.opts.RowsPerApply
	var (
		out   []span
		from  int
		bytes int
	)
	for i, t := range txns {
		size := rowTxnSize(t)
		if i > from && (i-from >= limit || bytes+size > maxApplyBytes) {
			out = append(out, span{from, i})
			from, bytes = i, 0
		}
		bytes += size
	}
	return append(out, span{from, len(txns)})
}

// rowTxnSize approximates the encoded size of t.
func rowTxnSize(t *store.RowTxn) int {
	n := len(t.Table) + len(t.Row) + 8
	for i := range t.Checks {
		c := &t.Checks[i]
		n += len(c.Column.Family) + len(c.Column.Qualifier) + len(c.ValuePrefix) + 20
	}
	for i := range t.Mutations {
		m := &t.Mutations[i]
		n += len(m.Column.Family) + len(m.Column.Qualifier) + len(m.Value) + len(m.IfValuePrefix) + 12
	}
	return n
}

// applyChunk applies txns[c.from:c.to] with one ApplyAll (or Apply, for
// one row) into results.
func (db *DB) applyChunk(ctx context.Context, what string, txns []*store.RowTxn, results []store.RowResult, c span, done func(int, store.RowResult) error) error {
	first := txns[c.from]
	if c.to-c.from == 1 {
		res, err := db.st.Apply(ctx, first)
		if err != nil {
			return fmt.Errorf("framework: %s %s/%q: %w", what, first.Table, first.Row, err)
		}
		results[c.from] = res
	} else {
		rs, err := db.st.ApplyAll(ctx, txns[c.from:c.to])
		if err == nil && len(rs) != c.to-c.from {
			err = fmt.Errorf("%d results for %d row transactions: %w", len(rs), c.to-c.from, protocol.ErrCorrupt)
		}
		if err != nil {
			return fmt.Errorf("framework: %s of %d rows from %s/%q: %w", what, c.to-c.from, first.Table, first.Row, err)
		}
		copy(results[c.from:c.to], rs)
	}
	if done != nil {
		for i := c.from; i < c.to; i++ {
			if err := done(i, results[i]); err != nil {
				return err
			}
		}
	}
	return nil
}
