package notify

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/percolator"
)

// otherEngine is an engine of another type than the one framework.Open
// builds: it runs on that one underneath and counts what the runtime asks
// of it through the seam.
type otherEngine struct {
	*percolator.DB
	transacts, finds, pendings, claims, settles, renotified atomic.Int64
}

func (e *otherEngine) Transact(ctx context.Context, o engine.TxnOptions, fn func(context.Context, engine.Txn) error) error {
	e.transacts.Add(1)
	return e.DB.Transact(ctx, o, fn)
}

func (e *otherEngine) Find(ctx context.Context, table string, start, end []byte) iter.Seq2[engine.Notification, error] {
	e.finds.Add(1)
	return e.DB.Find(ctx, table, start, end)
}

func (e *otherEngine) Pending(ctx context.Context, n engine.Notification) (*engine.Pending, error) {
	e.pendings.Add(1)
	return e.DB.Pending(ctx, n)
}

func (e *otherEngine) Claim(ctx context.Context, tx engine.Txn, observer string, kind engine.Kind, p *engine.Pending) (bool, error) {
	e.claims.Add(1)
	return e.DB.Claim(ctx, tx, observer, kind, p)
}

func (e *otherEngine) Settle(ctx context.Context, p *engine.Pending, runTs uint64) (engine.Settled, error) {
	e.settles.Add(1)
	return e.DB.Settle(ctx, p, runTs)
}

var _ engine.Engine = (*otherEngine)(nil)

// The front and the observer runtime reach an engine only through the
// seam: on an engine of another type, a chain of two observers runs to the
// end, every step going through the engine's interface, and what only the
// store's own engine has (backfill) fails saying so instead of reaching
// around the seam.
func TestTheRuntimeRunsOnAnyEngineBehindTheSeam(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	in, mid := Column{Family: "d", Qualifier: "in"}, Column{Family: "d", Qualifier: "mid"}
	reg := framework.NewRegistry()
	copyTo := func(to Column) framework.ObserverFunc {
		return func(ctx context.Context, tx *framework.Txn, row []byte, col Column) error {
			v, err := tx.Get(ctx, "t", row, col)
			if err != nil {
				return err
			}
			return tx.Set("t", row, to, append(v, '+'))
		}
	}
	for _, o := range []framework.Observer{
		{Name: "first", Table: "t", Columns: []Column{in}, Kind: framework.Strong, Fn: copyTo(mid)},
		{Name: "second", Table: "t", Columns: []Column{mid}, Kind: framework.Strong, Fn: copyTo(Column{Family: "d", Qualifier: "out"})},
	} {
		if err := reg.Register(o); err != nil {
			t.Fatal(err)
		}
	}
	other := &otherEngine{DB: e.db(t, "other", func(o *percolator.Options) { o.Observed = observedBy(reg) })}
	db := (*framework.DB)(engine.NewDB(other))
	p := NewProcessor(db, reg)
	const rows = 5
	for i := range rows {
		if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			return tx.Set("t", fmt.Appendf(nil, "r%d", i), in, []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; ; round++ {
		var ns []Notification
		for n, err := range p.Find(ctx, "t", nil, nil) {
			if err != nil {
				t.Fatal(err)
			}
			ns = append(ns, n)
		}
		if len(ns) == 0 {
			break
		}
		if round > 10 {
			t.Fatalf("notifications keep coming: %v", ns)
		}
		for _, n := range ns {
			if _, err := p.Process(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range rows {
		if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
			v, err := tx.Get(ctx, "t", fmt.Appendf(nil, "r%d", i), Column{Family: "d", Qualifier: "out"})
			if err == nil && string(v) != "v++" {
				err = fmt.Errorf("out = %q, want %q", v, "v++")
			}
			return err
		}); err != nil {
			t.Fatalf("row r%d: %v", i, err)
		}
	}
	if s := p.Stats(); s.Runs.Load() != 2*rows {
		t.Errorf("%d observer runs, want %d", s.Runs.Load(), 2*rows)
	}
	// Every write and every run went through Transact; every run read
	// its pending notifications, claimed the change and settled.
	if got, want := other.transacts.Load(), int64(rows+2*rows+rows); got != want {
		t.Errorf("%d transactions through the seam, want %d (writes, runs, reads)", got, want)
	}
	for name, n := range map[string]int64{"Pending": other.pendings.Load(), "Claim": other.claims.Load(), "Settle": other.settles.Load()} {
		if n != 2*rows {
			t.Errorf("%s called %d times through the seam, want %d", name, n, 2*rows)
		}
	}
	if other.finds.Load() == 0 {
		t.Error("notifications were not found through the seam")
	}
	// An observer nobody published is reported as such, on any engine.
	if _, err := Backfill(ctx, db, "first", BackfillOptions{}); !errors.Is(err, ErrUnknownObserver) {
		t.Errorf("backfill of an unpublished observer on another engine: %v, want an error matching ErrUnknownObserver", err)
	}
	if err := Publish(ctx, other.Store(), reg); err != nil {
		t.Fatal(err)
	}
	// A backfill reads and notifies through the seam too.
	before := other.renotified.Load()
	if pr, err := Backfill(ctx, db, "first", BackfillOptions{}); err != nil || !pr.Done || pr.Rows != rows {
		t.Errorf("backfill on another engine: %+v, %v; want %d rows done", pr, err, rows)
	}
	if got := other.renotified.Load() - before; got != rows {
		t.Errorf("backfill renotified %d cells through the seam, want %d", got, rows)
	}
}

func (e *otherEngine) Renotify(ctx context.Context, at uint64, rows []engine.NotifiedRow) (int, error) {
	n, err := e.DB.Renotify(ctx, at, rows)
	e.renotified.Add(int64(n))
	return n, err
}
