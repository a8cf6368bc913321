package admin_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/admin"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/oracle"
)

// Each observer's backlog and the age of its oldest pending write are
// reported apart, and collapse to nothing once the observers caught up.
func TestLagPerObserver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	release := make(chan struct{})
	reg := framework.NewRegistry()
	for _, name := range []string{"fast", "stuck"} {
		col := framework.Column{Family: "c", Qualifier: name}
		err := reg.Register(framework.Observer{Name: name, Table: "t", Columns: []framework.Column{col}, Kind: framework.Strong,
			Fn: func(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
				if name == "stuck" {
					select {
					case <-release:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
	}
	env, err := frameworktest.Start(ctx, reg, &frameworktest.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	began := time.Now()
	write := func(col string, rows int) {
		for i := range rows {
			for range 2 { // two writes per cell: one pending cell, two writes
				if err := env.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
					return tx.Set("t", fmt.Appendf(nil, "r%d", i), framework.Column{Family: "c", Qualifier: col}, []byte("x"))
				}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	env.StopObservers() // hold every notification for the first look
	write("stuck", 5)
	write("fast", 3)
	ls, err := admin.Lag(ctx, env.Store())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]admin.ObserverLag{}
	for _, l := range ls {
		got[l.Observer] = l
	}
	if s, f := got["stuck"], got["fast"]; s.Pending != 5 || s.Writes != 10 || f.Pending != 3 || f.Writes != 6 {
		t.Fatalf("lag %+v; want stuck 5 cells (10 writes), fast 3 (6)", ls)
	}
	if s := got["stuck"]; s.Oldest.Before(began.Add(-time.Second)) || s.Age(time.Now()) > time.Since(began)+time.Second || s.Table != "t" {
		t.Fatalf("stuck's oldest write at %v (age %v), the test began at %v", s.Oldest, s.Age(time.Now()), began)
	}
	close(release)
	env2, err := frameworktest.Start(ctx, reg, &frameworktest.Options{Store: env.Store(), Oracle: env.Oracle().(*oracle.Server)})
	if err != nil {
		t.Fatal(err)
	}
	defer env2.Close()
	if err := env2.WaitForObservers(ctx); err != nil {
		t.Fatal(err)
	}
	ls, err = admin.Lag(ctx, env.Store())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		if l.Pending != 0 || l.Age(time.Now()) != 0 {
			t.Errorf("after the observers caught up: %+v", l)
		}
	}
}
