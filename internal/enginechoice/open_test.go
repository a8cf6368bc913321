package enginechoice_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tikv/pd/client/constants"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/enginechoice"
	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// The TiKV engines of one store share one GC barrier on PD, which the
// store's Close deletes; a closed store opens no engine.
func TestTheEnginesOfATiKVStoreShareOneBarrierThatCloseDeletes(t *testing.T) {
	ctx := context.Background()
	c := tikvtest.New(t, nil)
	st, err := c.OpenStore(nil)
	if err != nil {
		t.Fatal(err)
	}
	states := c.KV.GetPDClient().GetGCStatesClient(constants.NullKeyspaceID)
	barriers := func() int {
		t.Helper()
		s, err := states.GetGCState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(s.GCBarriers)
	}
	choice, err := enginechoice.Choose(st, "")
	if err != nil || choice.Name != enginechoice.TiKV || choice.TiKV != st {
		t.Fatalf("Choose = %+v, %v; want the TiKV engine on the store", choice, err)
	}
	for range 2 {
		if _, err := enginechoice.Open(ctx, st, nil, choice, engine.Config{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := barriers(); n != 1 {
		t.Fatalf("%d GC barriers on PD after two engines opened, want 1", n)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if n := barriers(); n != 0 {
		t.Fatalf("%d GC barriers on PD after the store closed, want 0", n)
	}
	if _, err := enginechoice.Open(ctx, st, nil, choice, engine.Config{}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Open on a closed store: %v, want store.ErrClosed", err)
	}
}
