package notify

import (
	"context"
	"errors"
	"iter"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/enginechoice"
	"github.com/trickle-dev/trickle/internal/percolator"
	"github.com/trickle-dev/trickle/store"
)

// Find yields the pending notifications of table whose rows are in
// [start, end) (nil: unbounded), in row order, reading the notify locality
// group only. A cell that does not decode is yielded as an error and the
// sequence goes on; a store error ends it.
func Find(ctx context.Context, st store.Store, table string, start, end []byte) iter.Seq2[Notification, error] {
	n, err := notificationsIn(ctx, st)
	if err != nil {
		return func(yield func(Notification, error) bool) { yield(Notification{}, err) }
	}
	return front(n.Find(ctx, table, start, end))
}

// finder is what the readers of a store's notifications use of its
// engine.
type finder interface {
	Find(ctx context.Context, table string, start, end []byte) iter.Seq2[engine.Notification, error]
	Backlog(ctx context.Context, table string) iter.Seq2[engine.Waiting, error]
}

// notificationsIn returns the notifications of the engine whose data st
// holds (the one recorded in it, else the one it declares; see
// framework.Engine): a TiKV store's own, or the framework's protocol's,
// read from the store's cells. It never guesses by st's type: a wrapper
// of a TiKV store that does not unwrap fails rather than show the
// protocol's empty key space.
func notificationsIn(ctx context.Context, st store.Store) (finder, error) {
	c, err := enginechoice.Find(ctx, st)
	if err != nil {
		return nil, err
	}
	if c.Native != nil {
		return c.Native.TransactionEngine(ctx, engine.Config{})
	}
	return storeNotifications{st}, nil
}

// storeNotifications reads the notifications the framework's protocol
// keeps in a store's notify locality group.
type storeNotifications struct{ st store.Store }

func (s storeNotifications) Find(ctx context.Context, table string, start, end []byte) iter.Seq2[engine.Notification, error] {
	return percolator.FindIn(ctx, s.st, table, start, end)
}

func (s storeNotifications) Backlog(ctx context.Context, table string) iter.Seq2[engine.Waiting, error] {
	return percolator.BacklogIn(ctx, s.st, table)
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
