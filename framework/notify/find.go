package notify

import (
	"context"
	"errors"
	"iter"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/enginechoice"
	"github.com/trickle-dev/trickle/store"
)

// Find yields the pending notifications of table whose rows are in
// [start, end) (nil: unbounded), in row order, reading the notify locality
// group only. A cell that does not decode is yielded as an error and the
// sequence goes on; a store error ends it.
func Find(ctx context.Context, st store.Store, table string, start, end []byte) iter.Seq2[Notification, error] {
	n, err := enginechoice.NotificationsIn(ctx, st)
	if err != nil {
		return func(yield func(Notification, error) bool) { yield(Notification{}, err) }
	}
	return front(n.Find(ctx, table, start, end))
}

// Find yields the pending notifications of table whose rows are in
// [start, end), as the package's Find, from the engine the processor runs
// on: what its scanners look through.
func (p *Processor) Find(ctx context.Context, table string, start, end []byte) iter.Seq2[Notification, error] {
	return front(p.e.Find(ctx, table, start, end))
}

// front is ns as the package names notifications.
func front(ns iter.Seq2[engine.Notification, error]) iter.Seq2[Notification, error] {
	return func(yield func(Notification, error) bool) {
		for n, err := range ns {
			if !yield(Notification(n), err) {
				return
			}
		}
	}
}

// ErrUndecodable marks a notify cell Find could not decode (the sequence
// goes on after it).
var ErrUndecodable = engine.ErrUndecodable

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
