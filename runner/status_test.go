package runner_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/runner"
)

// An observer that keeps failing shows in the status with its backlog,
// the age of its oldest pending write and its last error, and in the
// metrics; the others show as up to date.
func TestStatusShowsEachObserversLag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := framework.NewRegistry()
	for _, name := range []string{"healthy", "broken"} {
		col := framework.Column{Family: "f", Qualifier: name}
		if err := reg.Register(framework.Observer{Name: name, Table: "t", Columns: []framework.Column{col}, Kind: framework.Strong,
			Fn: func(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
				if name == "broken" {
					return errors.New("the search cluster refused the update")
				}
				return nil
			}}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := runner.Start(ctx, runner.Config{Deployment: runner.Deployment{DataDir: t.TempDir(), NATSPort: -1, Logger: quiet()}, HTTPAddr: "127.0.0.1:0"}, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	defer func() { stop(); <-done }()
	began := time.Now()
	for _, name := range []string{"healthy", "broken"} {
		if err := r.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			return tx.Set("t", []byte("row"), framework.Column{Family: "f", Qualifier: name}, []byte("v"))
		}); err != nil {
			t.Fatal(err)
		}
	}
	var s *runner.Status
	for deadline := time.Now().Add(20 * time.Second); ; {
		if s, err = runner.GetStatus(ctx, r.Node()); err != nil {
			t.Fatal(err)
		}
		if len(s.Failing) > 0 && s.Pending == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failure recorded: %+v", s)
		}
		time.Sleep(20 * time.Millisecond) // polling for the failure record
	}
	lags := map[string]time.Duration{}
	for _, l := range s.Observers {
		lags[l.Observer] = l.Age(s.Taken)
		if l.Observer == "broken" && l.Pending != 1 {
			t.Errorf("broken: %d pending, want 1", l.Pending)
		}
	}
	if lags["healthy"] != 0 || lags["broken"] <= 0 || lags["broken"] > time.Since(began)+time.Second {
		t.Errorf("lags %v: want healthy 0, broken since the test began", lags)
	}
	var out bytes.Buffer
	s.Print(&out)
	for _, want := range []string{"broken", "healthy", "the search cluster refused the update", "lag (oldest pending write)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, out.String())
		}
	}
	for r.HTTPAddr() == "" {
		time.Sleep(10 * time.Millisecond) // until Run serves
	}
	m := scrape(t, r.HTTPAddr())
	if v, ok := series(m, "trickle_observer_pending", `observer="broken"`); !ok || v != 1 {
		t.Errorf("trickle_observer_pending for broken = %v (found %v), want 1", v, ok)
	}
	if v, ok := series(m, "trickle_observer_lag_seconds", `observer="broken"`); !ok || v <= 0 {
		t.Errorf("trickle_observer_lag_seconds for broken = %v (found %v), want above 0", v, ok)
	}
	if v, ok := series(m, "trickle_observer_lag_seconds", `observer="healthy"`); !ok || v != 0 {
		t.Errorf("trickle_observer_lag_seconds for healthy = %v (found %v), want 0", v, ok)
	}
}
