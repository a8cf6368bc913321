package remote

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/trickle-dev/trickle/oracle"
)

// oracleEnv is an oracle served over an embedded NATS server.
type oracleEnv struct {
	ns      *natsserver.Server
	backend *countingOracle
	svc     *OracleService
}

// newOracleEnv serves a fresh oracle with opts (nil: defaults; the logger
// is always quiet).
func newOracleEnv(t testing.TB, opts *ServiceOptions) *oracleEnv {
	t.Helper()
	ns := startNATS(t)
	b := newCountingOracle(t)
	svc, err := ServeOracle(connect(t, ns), b, quietService(opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
	return &oracleEnv{ns: ns, backend: b, svc: svc}
}

// newOracleClient returns an OracleClient on its own connection.
func (e *oracleEnv) newOracleClient(t testing.TB, opts *ClientOptions) *OracleClient {
	t.Helper()
	c, err := NewOracle(connect(t, e.ns), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestOracleMonotonicUnique: goroutines of two processes (connections),
// each process coalescing through an oracle.Client, all get unique
// timestamps, increasing within every goroutine.
func TestOracleMonotonicUnique(t *testing.T) {
	env := newOracleEnv(t, nil)
	var coalescers []*oracle.Client
	for range 2 {
		c, err := oracle.NewClient(env.newOracleClient(t, nil), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		coalescers = append(coalescers, c)
	}
	direct := env.newOracleClient(t, nil)
	const workers, iters = 32, 300
	got := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range iters {
				var ts uint64
				var err error
				switch {
				case i%10 == 9: // a batch of three, straight through the OracleClient
					ts, err = direct.Reserve(bg, 3)
					if err == nil {
						got[w] = append(got[w], ts, ts+1)
						ts += 2
					}
				default:
					ts, err = coalescers[w%2].Timestamp(bg)
				}
				if err != nil {
					t.Error(err)
					return
				}
				if n := len(got[w]); n > 0 && ts <= got[w][n-1] {
					t.Errorf("worker %d: %d after %d", w, ts, got[w][n-1])
				}
				got[w] = append(got[w], ts)
			}
		})
	}
	wg.Wait()
	all := slices.Concat(got...)
	slices.Sort(all)
	if len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Fatal("duplicate timestamps")
	}
	issued, current, err := direct.Stats(bg)
	if err != nil {
		t.Fatal(err)
	}
	if issued != env.backend.Issued() || issued < uint64(len(all)) {
		t.Errorf("Stats issued %d, backend %d, served %d", issued, env.backend.Issued(), len(all))
	}
	if current != all[len(all)-1] {
		t.Errorf("Stats current %d, want the highest served %d", current, all[len(all)-1])
	}
	for i, c := range coalescers {
		st := c.Stats()
		t.Logf("process %d: %d timestamps in %d batches", i, st.Timestamps, st.Batches)
	}
}

func TestOracleErrors(t *testing.T) {
	env := newOracleEnv(t, nil)
	c := env.newOracleClient(t, nil)
	for _, n := range []int{0, -1, oracle.MaxReserve + 1} {
		if _, err := c.Reserve(bg, n); !errors.Is(err, oracle.ErrInvalidCount) {
			t.Errorf("Reserve(%d): %v, want ErrInvalidCount", n, err)
		}
	}
	// A forged count reaches the server's own check.
	_, err := c.c.request(bg, "Reserve", c.reserve, func(e *encoder) { e.uvarint(0) })
	if !errors.Is(err, oracle.ErrInvalidCount) {
		t.Errorf("forged Reserve(0): %v, want ErrInvalidCount", err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := c.Reserve(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Reserve: %v", err)
	}
	env.backend.Close()
	if _, err := c.Reserve(bg, 1); !errors.Is(err, oracle.ErrClosed) {
		t.Errorf("Reserve on a closed oracle: %v, want oracle.ErrClosed", err)
	}
	env.svc.Stop()
	if _, err := c.Reserve(bg, 1); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Reserve on a stopped service: %v, want ErrUnavailable", err)
	}
	if _, _, err := c.Stats(bg); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Stats on a stopped service: %v, want ErrUnavailable", err)
	}
	c.Close()
	if _, err := c.Reserve(bg, 1); !errors.Is(err, oracle.ErrClosed) {
		t.Errorf("Reserve after Close: %v, want oracle.ErrClosed", err)
	}
}
