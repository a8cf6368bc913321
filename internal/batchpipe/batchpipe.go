// Package batchpipe overlaps the three steps of a batched computation:
// producing batches, working on each (typically on every core), and
// finishing each in order (typically writing it somewhere sequential).
// With the steps on different goroutines, a machine with few cores keeps
// them all busy where running the steps in turn leaves all but one idle
// while a batch is produced or finished.
package batchpipe

import (
	"context"
	"sync"
)

// Run calls produce, which sends batches (send reports false once the
// pipeline stops: produce should then return), work on each batch as it
// comes, and finish on each worked batch, in the order sent. At most two
// batches wait between the steps besides the three being handled. produce
// and work run on goroutines of their own, finish on the caller's. The
// first error of finish, else of produce, is returned; an error of finish
// or the end of ctx stops the other steps (and Run then returns ctx's
// error if none other).
func Run[T any](ctx context.Context, produce func(ctx context.Context, send func(T) bool) error, work func(T), finish func(T) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in, out := make(chan T, 1), make(chan T, 1)
	var perr error
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(in)
		perr = produce(ctx, func(b T) bool {
			select {
			case in <- b:
				return true
			case <-ctx.Done():
				return false
			}
		})
	})
	wg.Go(func() {
		defer close(out)
		for b := range in {
			work(b)
			select {
			case out <- b:
			case <-ctx.Done():
				for range in { // until produce returns
				}
				return
			}
		}
	})
	var ferr error
	for b := range out {
		if ferr == nil {
			if ferr = finish(b); ferr != nil {
				cancel()
			}
		}
	}
	wg.Wait()
	switch {
	case ferr != nil:
		return ferr
	case perr != nil:
		return perr
	}
	return context.Cause(ctx)
}
