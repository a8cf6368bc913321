package notify

import (
	"context"
	"testing"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/store"
)

// Rule: a settled notification is removed with a single delete (its
// version is written once, so the write and the delete vanish together
// at the next flush instead of leaving a tombstone in the notify group for
// every scan to step over). Were a version ever written twice (a weak
// notification's write retried after a lost answer), the single delete
// would let the first write come back once compaction meets them. That is
// harmless by construction: the notification is settled again against the
// observer's ack, without another run of a strong observer.
func TestResurrectedNotificationIsSettledWithoutARun(t *testing.T) {
	ctx := context.Background()
	e := newObsEnv(t, counter("count", colA))
	e.set(t, e.main, "r", colA, "x")
	var cells []store.Cell
	for c, err := range e.st.Scan(ctx, store.ScanRequest{Table: "t", Group: protocol.NotifyGroup}) {
		if err != nil {
			t.Fatal(err)
		}
		cells = append(cells, c)
	}
	if len(cells) != 1 {
		t.Fatalf("%d notify cells after one write, want 1", len(cells))
	}
	c := cells[0]
	// The same version written a second time.
	if _, err := e.st.Apply(ctx, &store.RowTxn{Table: "t", Row: c.Row, Mutations: []store.Mutation{{Column: c.Column, Ts: c.Ts, Value: c.Value}}}); err != nil {
		t.Fatal(err)
	}
	e.drain(t)
	if got := e.get(t, "r", colC); got != "1" {
		t.Fatalf("observer ran %s times, want 1", got)
	}
	if err := e.st.CompactGroup(ctx, protocol.NotifyGroup); err != nil {
		t.Fatal(err)
	}
	back := e.pending(t)
	if len(back) != 1 {
		t.Fatalf("after compaction %d notifications, want the first write back (the test no longer sets up a resurrection)", len(back))
	}
	e.drain(t)
	if got := e.get(t, "r", colC); got != "1" {
		t.Fatalf("observer ran %s times after the notification came back, want still 1", got)
	}
}
