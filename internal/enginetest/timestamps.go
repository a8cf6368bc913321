package enginetest

import (
	"context"
	"errors"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/store"
)

// The rules of a transaction for which no timestamp could be drawn: it
// certainly did not commit, so it is run again, a few times at most (see
// engine.Retry).
var timestampRules = []rule{
	{"an update through a brief outage of the oracle commits", testBriefOutage},
	{"an update through a lasting outage fails with store.ErrNoTimestamp within a few attempts, having written nothing", testLastingOutage},
}

// outage opens an engine with c on a new store whose timestamps fail
// while outage says; it skips the case if the harness cannot fail them.
func outage(t *testing.T, h Harness, c engine.Config) (engine.Engine, func(n int64)) {
	t.Helper()
	if h.NewOutageStore == nil {
		t.Skip("the harness cannot fail the store's timestamps")
	}
	open, fail := h.NewOutageStore(t)
	if c.Observed == nil {
		c.Observed = observedSet{}
	}
	t.Cleanup(func() { fail(0) })
	return open(t, c), fail
}

func testBriefOutage(t *testing.T, h Harness) {
	e, fail := outage(t, h, engine.Config{})
	fail(engine.TimestampRetries)
	runs := 0
	err := e.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		runs++
		return put(tx, cell{"r", colA, "v"})
	})
	if err != nil {
		t.Fatalf("update through %d failed timestamps: %v, want it committed", engine.TimestampRetries, err)
	}
	if runs > engine.TimestampRetries+1 {
		t.Errorf("fn ran %d times, want at most %d", runs, engine.TimestampRetries+1)
	}
	if v := read(t, e, "r", colA); v != "v" {
		t.Fatalf("r = %q after the update, want v", v)
	}
}

func testLastingOutage(t *testing.T, h Harness) {
	e, fail := outage(t, h, engine.Config{})
	fail(1 << 40)
	runs := 0
	err := e.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		runs++
		return put(tx, cell{"r", colA, "v"})
	})
	if !errors.Is(err, store.ErrNoTimestamp) || errors.Is(err, engine.ErrCommitUnknown) {
		t.Fatalf("update through a lasting outage: %v, want store.ErrNoTimestamp", err)
	}
	if runs > engine.TimestampRetries+1 {
		t.Errorf("fn ran %d times, want at most %d", runs, engine.TimestampRetries+1)
	}
	fail(0)
	if v := read(t, e, "r", colA); v != "-" {
		t.Fatalf("r = %q after the failed update, want it absent", v)
	}
}
