package tikvtest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

var col = store.Column{Family: "f", Qualifier: "q"}

// The cluster counts its requests by type and PD's timestamps apart, so
// that benchmarks can say where a page's requests go.
func TestRequestsAreCountedByType(t *testing.T) {
	ctx := context.Background()
	c := tikvtest.New(t, nil)
	st := c.Open(t, nil)
	if _, err := st.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: col, Ts: 1, Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ReadRow(ctx, "t", []byte("r"), []store.Column{col}, nil); err != nil {
		t.Fatal(err)
	}
	by := c.RPCsByType()
	var sum int64
	for _, n := range by {
		sum += n
	}
	if sum != c.RPCs() {
		t.Errorf("requests by type sum to %d, RPCs() = %d (%s)", sum, c.RPCs(), c.Summary())
	}
	if by["Prewrite"] == 0 || by["Commit"] == 0 {
		t.Errorf("a write sent no prewrite or no commit: %s", c.Summary())
	}
	if c.Timestamps() == 0 {
		t.Errorf("a transaction drew no timestamp from PD: %s", c.Summary())
	}
}

// Simulated latency delays every request, and a request whose deadline
// comes first fails with it instead of waiting the latency out: reads,
// writes and PD's timestamps alike.
func TestLatencyDelaysRequestsWithinTheirDeadline(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		lat  tikvtest.Latency
		op   func(ctx context.Context, st *tikv.Store) error
	}{
		// An exact version is one batched get; client-go's scans do not
		// pass their caller's context down to their requests.
		{"read", tikvtest.Latency{Read: 2 * time.Second}, func(ctx context.Context, st *tikv.Store) error {
			_, err := st.ReadRow(ctx, "t", []byte("r"), []store.Column{col}, []store.Span{{MinTs: 1, MaxTs: 1}})
			return err
		}},
		{"write", tikvtest.Latency{Write: 2 * time.Second}, func(ctx context.Context, st *tikv.Store) error {
			_, err := st.Apply(ctx, &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: col, Ts: 1, Value: []byte("v")}}})
			return err
		}},
		{"timestamp", tikvtest.Latency{Timestamp: 2 * time.Second}, func(ctx context.Context, st *tikv.Store) error {
			_, err := st.Oracle().Timestamp(ctx)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tikvtest.New(t, nil)
			st := c.Open(t, nil)
			if err := c.SetLatency(tc.lat); err != nil {
				t.Fatal(err)
			}
			dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			err := tc.op(dctx, st)
			if err == nil {
				t.Fatalf("a %s with 2s of latency answered within 100ms", tc.name)
			}
			if !errors.Is(err, context.DeadlineExceeded) && dctx.Err() == nil {
				t.Fatalf("a %s failed before its deadline: %v", tc.name, err)
			}
		})
	}
}

func TestNegativeLatencyIsRefused(t *testing.T) {
	if _, err := tikvtest.Start(&tikvtest.Options{Latency: tikvtest.Latency{Write: -time.Millisecond}}); err == nil {
		t.Fatal("a negative latency was accepted")
	}
}

// A read that scans (every version of a cell, here) gives up at its
// deadline too, although client-go's scans do not pass their caller's
// context to their requests.
func TestAScanGivesUpAtItsDeadline(t *testing.T) {
	c := tikvtest.New(t, nil)
	st := c.Open(t, nil)
	if err := c.SetLatency(tikvtest.Latency{Read: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := st.ReadRow(ctx, "t", []byte("r"), []store.Column{col}, nil)
	if err == nil {
		t.Fatal("a scan with 5s of latency answered within 100ms")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the scan failed with %v, want its deadline", err)
	}
	t.Logf("gave up after %v: %v", time.Since(began).Round(time.Millisecond), err)
}
