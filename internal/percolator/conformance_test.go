package percolator

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/enginetest"
)

// TestConformance runs the engine conformance suite on the protocol over
// pebble in memory: with one-phase commits where a transaction's rows
// allow them, and with every commit in two phases.
func TestConformance(t *testing.T) {
	for _, v := range []struct {
		name     string
		twoPhase bool
	}{{"one-phase", false}, {"two-phase", true}} {
		t.Run(v.name, func(t *testing.T) {
			opener := func(e *env) enginetest.Opener {
				return func(t *testing.T, c engine.Config) engine.Engine {
					return e.dbWith(t, e.st, conformanceOptions(e, c, v.twoPhase))
				}
			}
			enginetest.RunConformance(t, enginetest.Harness{
				NewStore: func(t *testing.T) enginetest.Opener { return opener(newEnv(t)) },
				NewOutageStore: func(t *testing.T) (enginetest.Opener, func(int64)) {
					e := newEnv(t)
					or := &outageOracle{Oracle: e.or}
					e.or = or
					return opener(e), or.fail.Store
				},
			})
		})
	}
}

// outageOracle fails the next timestamps it is told to (see
// enginetest.Harness.NewOutageStore).
type outageOracle struct {
	Oracle
	fail atomic.Int64
}

func (o *outageOracle) Timestamp(ctx context.Context) (uint64, error) {
	for n := o.fail.Load(); n > 0; n = o.fail.Load() {
		if o.fail.CompareAndSwap(n, n-1) {
			return 0, errOracleDown
		}
	}
	return o.Oracle.Timestamp(ctx)
}

// conformanceOptions are the options of a DB opened with c, as the front
// opens one, on e's liveness service.
func conformanceOptions(e *env, c engine.Config, twoPhase bool) *Options {
	o := &Options{
		WorkerID: c.WorkerID, Observed: c.Observed, Guards: c.Guards, DeclaredGuards: c.DeclaredGuards,
		Liveness: e.live, Lease: c.Lease, Notified: c.Notified, LockTTL: 10 * time.Second,
		MaxAttempts: c.MaxAttempts, RetryBackoffMin: c.RetryBackoffMin, RetryBackoffMax: c.RetryBackoffMax,
		DisableOnePhase: twoPhase, Logger: quietLogger(),
	}
	return o
}
