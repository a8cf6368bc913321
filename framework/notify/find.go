package notify

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// Find yields the pending notifications of table whose rows are in
// [start, end) (nil: unbounded), in row order, reading the notify locality
// group only. A cell that does not decode is yielded as an error and the
// sequence goes on; a store error ends it.
func Find(ctx context.Context, st store.Store, table string, start, end []byte) iter.Seq2[Notification, error] {
	return func(yield func(Notification, error) bool) {
		req := store.ScanRequest{
			Table: table, Group: protocol.NotifyGroup, Start: start, End: end,
			Filter: store.ColumnFilter{Families: []string{protocol.NotifyFamily}},
			Spans:  []store.Span{{MaxTs: ^uint64(0), Limit: 1}},
		}
		for c, err := range st.Scan(ctx, req) {
			if err != nil {
				yield(Notification{}, fmt.Errorf("notify: finding notifications of %s: %w", table, err))
				return
			}
			n, err := Of(table, c)
			if err != nil {
				err = fmt.Errorf("%w in %s row %q: %w", ErrUndecodable, table, c.Row, err)
			}
			if !yield(n, err) {
				return
			}
		}
	}
}

// ErrUndecodable marks a notify cell Find could not decode (the sequence
// goes on after it).
var ErrUndecodable = errors.New("notify: undecodable notification")

// AnyPending reports whether any of tables has a pending notification,
// undecodable ones included. It stops at the first, so waiting for a busy
// deployment to drain does not count its backlog over and over.
func AnyPending(ctx context.Context, st store.Store, tables []string) (bool, error) {
	for _, t := range tables {
		for _, err := range Find(ctx, st, t, nil, nil) {
			if err != nil && !errors.Is(err, ErrUndecodable) {
				return false, err
			}
			return true, nil
		}
	}
	return false, nil
}

// Pending counts the pending notifications of tables, undecodable ones
// included.
func Pending(ctx context.Context, st store.Store, tables []string) (int, error) {
	n := 0
	for _, t := range tables {
		for _, err := range Find(ctx, st, t, nil, nil) {
			if err != nil && !errors.Is(err, ErrUndecodable) {
				return 0, err
			}
			n++
		}
	}
	return n, nil
}
