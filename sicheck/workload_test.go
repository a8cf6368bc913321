package sicheck_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/sicheck"
)

// runListAppend runs clients concurrent list-append clients of txns
// transactions each on db, each ending with a read of every key, then one
// more such read once they all finished (the history's last
// transaction), and returns the history as recorded.
func runListAppend(t *testing.T, db *framework.DB, clients, txns int) sicheck.History {
	t.Helper()
	ctx := context.Background()
	var buf bytes.Buffer
	rec := sicheck.NewRecorder(&buf)
	var wg sync.WaitGroup
	for p := range clients {
		w, err := sicheck.NewListAppend(db, rec, &sicheck.ListAppendOptions{Process: p, Keys: 4})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for range txns {
				w.Step(ctx)
			}
			w.ReadAll(ctx)
		})
	}
	wg.Wait()
	// One more read of every key, begun once every client finished.
	w, err := sicheck.NewListAppend(db, rec, &sicheck.ListAppendOptions{Process: clients, Keys: 4})
	if err != nil {
		t.Fatal(err)
	}
	if out := w.ReadAll(ctx); out != sicheck.OK {
		t.Fatalf("the final read: %s", out)
	}
	if err := rec.Err(); err != nil {
		t.Fatal(err)
	}
	h, err := sicheck.ReadHistory(&buf)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The framework's own transactions, run concurrently on few keys, make a
// valid history with real conflicts; the same history with one read made
// stale — a list shorter than one committed before the read began — is
// flagged.
func TestListAppendOnTheFramework(t *testing.T) {
	ctx := context.Background()
	env, err := frameworktest.Start(ctx, framework.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	h := runListAppend(t, env.DB(), 4, 60)
	r := sicheck.Check(h)
	if !r.Valid() {
		t.Fatalf("the framework's history: %s", r)
	}
	if r.OK == 0 || r.Edges["ww"] == 0 || r.Edges["rw"] == 0 || r.Edges["rt"] == 0 {
		t.Fatalf("a history with nothing to check: %s", r)
	}
	t.Log(r)

	// A read begun after every client finished, made stale: it misses
	// the last append to a key, which completed before it began.
	last := &h[len(h)-1]
	for j, op := range last.Ops {
		if len(op.List) > 0 {
			last.Ops[j].List = op.List[:len(op.List)-1]
			break
		}
	}
	if r := sicheck.Check(h); r.Valid() {
		t.Fatalf("a stale final read went unnoticed: %s", r)
	}
}

// Bank clients sharing accounts on the framework find every snapshot
// whole.
func TestBankOnTheFramework(t *testing.T) {
	ctx := context.Background()
	env, err := frameworktest.Start(ctx, framework.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	var wg sync.WaitGroup
	var banks []*sicheck.Bank
	for range 4 {
		b, err := sicheck.NewBank(env.DB(), &sicheck.BankOptions{Accounts: 5})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Open(ctx); err != nil {
			t.Fatal(err)
		}
		banks = append(banks, b)
		wg.Go(func() {
			for range 60 {
				if err := b.Step(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	reads := 0
	for _, b := range banks {
		for _, a := range b.Anomalies() {
			t.Error(a)
		}
		reads += b.Reads
	}
	if reads == 0 {
		t.Fatal("no snapshot was read")
	}
}
