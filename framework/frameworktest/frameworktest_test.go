package frameworktest_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
)

var (
	in  = framework.Column{Family: "c", Qualifier: "in"}
	mid = framework.Column{Family: "c", Qualifier: "mid"}
	out = framework.Column{Family: "c", Qualifier: "out"}
)

// copier copies from to to, adding a mark: a chain of them takes several
// observer runs, each triggered by the one before.
func copier(name string, from, to framework.Column) framework.Observer {
	return framework.Observer{Name: name, Table: "t", Columns: []framework.Column{from}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, col framework.Column) error {
			v, err := tx.Get(ctx, "t", row, col)
			if err != nil {
				return err
			}
			return tx.Set("t", row, to, append(v, '+'))
		}}
}

func start(t *testing.T, observers ...framework.Observer) *frameworktest.Env {
	t.Helper()
	reg := framework.NewRegistry()
	for _, o := range observers {
		if err := reg.Register(o); err != nil {
			t.Fatal(err)
		}
	}
	env, err := frameworktest.Start(context.Background(), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

func set(t *testing.T, db *framework.DB, row string, col framework.Column, v string) {
	t.Helper()
	if err := db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("t", []byte(row), col, []byte(v))
	}); err != nil {
		t.Fatal(err)
	}
}

// WaitForObservers returns only once a whole chain of observers has run,
// for every row written before the call.
func TestWaitForObserversWaitsForChains(t *testing.T) {
	env := start(t, copier("a", in, mid), copier("b", mid, out))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 50 {
		set(t, env.DB(), strconv.Itoa(i), in, "v")
	}
	if err := env.WaitForObservers(ctx); err != nil {
		t.Fatal(err)
	}
	err := env.DB().View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for i := range 50 {
			v, err := tx.Get(ctx, "t", []byte(strconv.Itoa(i)), out)
			if err != nil || string(v) != "v++" {
				t.Errorf("row %d: end of the chain is %q (%v) after WaitForObservers", i, v, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := env.Stats(); s.Runs != 100 {
		t.Errorf("%d observer runs, want 100", s.Runs)
	}
}

// An observer that keeps failing makes WaitForObservers fail, naming it
// and its error, instead of waiting for ever.
func TestWaitForObserversReportsAFailingObserver(t *testing.T) {
	boom := errors.New("boom")
	env := start(t, framework.Observer{Name: "broken", Table: "t", Columns: []framework.Column{in}, Kind: framework.Strong,
		Fn: func(context.Context, *framework.Txn, []byte, framework.Column) error { return boom }})
	set(t, env.DB(), "r", in, "v")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := env.WaitForObservers(ctx)
	if !errors.Is(err, frameworktest.ErrObserverFailing) || ctx.Err() != nil {
		t.Fatalf("wait with a failing observer: %v", err)
	}
	for _, want := range []string{"broken", "boom"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// After StopObservers the DB still works, but nothing runs any more.
func TestStopObservers(t *testing.T) {
	env := start(t, copier("a", in, out))
	env.StopObservers()
	env.StopObservers() // idempotent
	set(t, env.DB(), "r", in, "v")
	set(t, env.DB(), "s", in, "v")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := env.WaitForObservers(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait with stopped observers: %v, want the context's deadline", err)
	}
	if !strings.Contains(err.Error(), "2 notifications still pending") {
		t.Fatalf("error %q does not say how many notifications are left", err)
	}
	if s := env.Stats(); s.Runs != 0 {
		t.Fatalf("%d runs after StopObservers", s.Runs)
	}
}
