package notify

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/internal/published"
	"github.com/trickle-dev/trickle/store"
)

// The tests of this file check one rule: publishing is a union. A
// registry adds what it observes to what is published and never removes
// another's entries, however the publishers interleave; only Unpublish
// removes, and only what it names.

// registryOf registers observers in a fresh registry.
func registryOf(t *testing.T, observers ...framework.Observer) *framework.Registry {
	t.Helper()
	reg := framework.NewRegistry()
	for _, o := range observers {
		if err := reg.Register(o); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

// isPublished loads the published set and reports which of cols it holds.
func isPublished(t *testing.T, st store.Store, cols ...Column) []bool {
	t.Helper()
	ps, err := published.Load(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]bool, len(cols))
	for i, c := range cols {
		_, out[i] = ps.ObservedKind("t", c)
	}
	return out
}

func allTrue(bs []bool) bool {
	for _, b := range bs {
		if !b {
			return false
		}
	}
	return true
}

// Rule: a registry's publish keeps what other registries published, and
// an older registry publishing again (a runner of the previous version
// restarting in a rolling upgrade) does not take back a newer one's
// columns.
func TestPublishKeepsOtherRegistriesColumns(t *testing.T) {
	st := newEnv(t).st
	ctx := context.Background()
	older := registryOf(t, counter("a", colA))
	newer := registryOf(t, counter("a", colA), counter("b", colB))
	if err := Publish(ctx, st, older); err != nil {
		t.Fatal(err)
	}
	if err := Publish(ctx, st, newer); err != nil {
		t.Fatal(err)
	}
	if got := isPublished(t, st, colA, colB); !allTrue(got) {
		t.Fatalf("after the newer registry published: colA, colB published = %v", got)
	}
	if err := Publish(ctx, st, older); err != nil {
		t.Fatal(err)
	}
	if got := isPublished(t, st, colA, colB); !allTrue(got) {
		t.Fatalf("after the older registry published again: colA, colB published = %v, want both", got)
	}
	// Nor does a registry with nothing to observe.
	if err := Publish(ctx, st, framework.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	if got := isPublished(t, st, colA, colB); !allTrue(got) {
		t.Fatalf("after an empty registry published: colA, colB published = %v, want both", got)
	}
}

// rendezvous holds the first writes to the published row until two
// publishers have reached theirs, so that both have read the row before
// either writes it: the interleaving in which one's write could undo the
// other's.
type rendezvous struct {
	store.Store
	n       atomic.Int32
	arrived chan struct{}
	release chan struct{}
}

func (r *rendezvous) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	if txn.Table == protocol.MetaTable && bytes.Equal(txn.Row, published.Row) && r.n.Add(1) <= 2 {
		r.arrived <- struct{}{}
		<-r.release
	}
	return r.Store.Apply(ctx, txn)
}

// Rule: two runners publishing at once both end up published, when they
// observe different columns and when they share one (the same observer
// in both versions).
func TestConcurrentPublishersBothEndUpPublished(t *testing.T) {
	st := &rendezvous{Store: newEnv(t).st, arrived: make(chan struct{}, 2), release: make(chan struct{})}
	ctx := context.Background()
	regs := []*framework.Registry{
		registryOf(t, counter("shared", colC), counter("a", colA)),
		registryOf(t, counter("shared", colC), counter("b", colB)),
	}
	errs := make([]error, len(regs))
	var wg sync.WaitGroup
	for i, reg := range regs {
		wg.Go(func() { errs[i] = Publish(ctx, st, reg) })
	}
	<-st.arrived
	<-st.arrived
	close(st.release)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("publisher %d: %v", i, err)
		}
	}
	if got := isPublished(t, st, colA, colB, colC); !allTrue(got) {
		t.Fatalf("colA, colB, colC published = %v, want all", got)
	}

	// And many at once, unsynchronized, each with a column of its own.
	st2 := newEnv(t).st
	cols := make([]Column, 8)
	errs = make([]error, len(cols))
	for i := range cols {
		cols[i] = Column{Family: "c", Qualifier: string(rune('k' + i))}
		reg := registryOf(t, counter("shared", colC), counter("o"+cols[i].Qualifier, cols[i]))
		wg.Go(func() { errs[i] = Publish(ctx, st2, reg) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := isPublished(t, st2, append(cols, colC)...); !allTrue(got) {
		t.Fatalf("columns published by 8 concurrent publishers: %v, want all", got)
	}
}

// Rule: a column published for another observer or kind is not taken
// over: Publish fails naming both, and publishes nothing.
func TestPublishRefusesAColumnPublishedForAnotherObserver(t *testing.T) {
	st := newEnv(t).st
	ctx := context.Background()
	if err := Publish(ctx, st, registryOf(t, counter("a", colA))); err != nil {
		t.Fatal(err)
	}
	renamed := registryOf(t, counter("a2", colA), counter("b", colB))
	err := Publish(ctx, st, renamed)
	if !errors.Is(err, ErrPublishConflict) {
		t.Fatalf("publishing another observer of a published column: %v, want ErrPublishConflict", err)
	}
	if got := isPublished(t, st, colB); got[0] {
		t.Fatal("a refused publish published some of its columns")
	}
	ps, _ := published.Load(ctx, st)
	weak := counter("a", colA)
	weak.Kind = framework.Weak
	if err := Publish(ctx, st, registryOf(t, weak)); !errors.Is(err, ErrPublishConflict) {
		t.Fatalf("publishing a published column as weak: %v, want ErrPublishConflict", err)
	}
	if k, _ := ps.ObservedKind("t", colA); k != engine.Strong {
		t.Fatalf("the column's kind changed to %v", k)
	}
}

// Rule: Unpublish removes the named observers' columns and nothing else;
// a name that is not published fails and removes nothing.
func TestUnpublishRemovesOnlyWhatItNames(t *testing.T) {
	st := newEnv(t).st
	ctx := context.Background()
	reg := registryOf(t, counter("a", colA), counter("b", colB), counter("c", colC))
	if err := reg.Guard(framework.Guard{Table: "t", Family: "g", Of: func(row []byte, col Column) (string, []byte, Column) { return "t", row, colA }}); err != nil {
		t.Fatal(err)
	}
	if err := Publish(ctx, st, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := Unpublish(ctx, st, "a", "nobody"); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("Unpublish of an observer that is not published: %v, want ErrNotPublished", err)
	}
	if got := isPublished(t, st, colA, colB, colC); !allTrue(got) {
		t.Fatalf("a failed Unpublish removed columns: %v", got)
	}
	n, err := Unpublish(ctx, st, "a", "c")
	if err != nil || n != 2 {
		t.Fatalf("Unpublish a, c: %d columns, %v; want 2", n, err)
	}
	if got := isPublished(t, st, colA, colB, colC); got[0] || !got[1] || got[2] {
		t.Fatalf("after Unpublish a, c: colA, colB, colC published = %v, want only colB", got)
	}
	ps, _ := published.Load(ctx, st)
	if !ps.Guarded("t", "g") {
		t.Fatal("Unpublish of observers removed a guarded family")
	}
	if err := UnpublishGuard(ctx, st, "t", "g"); err != nil {
		t.Fatal(err)
	}
	if ps, _ := published.Load(ctx, st); ps.Guarded("t", "g") || ps.Len() != 1 {
		t.Fatalf("after UnpublishGuard: guarded %v, %d columns", ps.Guarded("t", "g"), ps.Len())
	}
	if err := UnpublishGuard(ctx, st, "t", "g"); !errors.Is(err, ErrNotPublished) {
		t.Fatalf("UnpublishGuard of a family that is not guarded: %v, want ErrNotPublished", err)
	}
	// A runner that still runs one publishes it again.
	if err := Publish(ctx, st, reg); err != nil {
		t.Fatal(err)
	}
	if got := isPublished(t, st, colA, colB, colC); !allTrue(got) {
		t.Fatalf("after publishing again: %v", got)
	}
}
