package percolator

import (
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
			enginetest.RunConformance(t, enginetest.Harness{NewStore: func(t *testing.T) enginetest.Opener {
				e := newEnv(t)
				return func(t *testing.T, c engine.Config) engine.Engine {
					return e.dbWith(t, e.st, conformanceOptions(e, c, v.twoPhase))
				}
			}})
		})
	}
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
