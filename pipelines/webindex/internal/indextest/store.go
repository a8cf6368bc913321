package indextest

import (
	"context"
	"iter"
	"sync/atomic"
	"time"

	"github.com/trickle-dev/trickle/store"
)

// CountingStore is a store.Store that counts the bytes of the cell values
// its reads return. With Hold set, every read first announces itself on
// Entered, then waits until Hold is closed.
type CountingStore struct {
	store.Store
	Bytes   atomic.Int64
	Hold    chan struct{}
	Entered chan struct{}
	// Delay, if set, slows every read down by that much.
	Delay time.Duration
}

func (s *CountingStore) wait(ctx context.Context) error {
	if s.Delay > 0 {
		time.Sleep(s.Delay)
	}
	if s.Hold == nil {
		return nil
	}
	select {
	case <-s.Hold:
		return nil
	default:
	}
	s.Entered <- struct{}{}
	select {
	case <-s.Hold:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ReadRow reads through the store, counting the values read.
func (s *CountingStore) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	cells, err := s.Store.ReadRow(ctx, table, row, cols, spans)
	for _, c := range cells {
		s.Bytes.Add(int64(len(c.Value)))
	}
	return cells, err
}

// Scan scans through the store, counting the values read.
func (s *CountingStore) Scan(ctx context.Context, req store.ScanRequest) iter.Seq2[store.Cell, error] {
	return func(yield func(store.Cell, error) bool) {
		if err := s.wait(ctx); err != nil {
			yield(store.Cell{}, err)
			return
		}
		for c, err := range s.Store.Scan(ctx, req) {
			s.Bytes.Add(int64(len(c.Value)))
			if !yield(c, err) {
				return
			}
		}
	}
}

// ReadBudget bounds the value bytes one list request may read: a few
// hundred bytes per result and per match. A single document is more than
// a hundred times as large.
const ReadBudget = 16 << 10
