package webindex

import (
	"context"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/store/tikv/tikvtest"
)

// TestARecomputeReadsInThreeRequests: a cluster's recompute is the index's
// most frequent transaction, and on a store over the network each read is
// a round trip. Recomputing a one-page cluster that has a state and anchor
// terms reads its own row with one scan, its member's cells with one
// batched read and the member's queued inlink deltas with one scan:
// three requests (it took five when the state, the members, the anchors,
// the counts and the member's row cells were read one by one).
func TestARecomputeReadsInThreeRequests(t *testing.T) {
	c := tikvtest.New(t, nil)
	target := &extract.Page{URL: "http://t.example/", Text: "alpha words"}
	ctx, ix, _, db, _ := indexedOnThenStopped(t, c.Open(t, nil), target,
		&extract.Page{URL: "http://s.example/", Text: "source words", Links: []extract.Link{{Target: target.URL, Anchor: "gamma"}}})
	key := schema.ClusterKey(target)
	reads := func() int64 {
		by := c.RPCsByType()
		return by["Get"] + by["BatchGet"] + by["Scan"]
	}
	var sent int64
	err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		cr, err := schema.ReadClusterRow(ctx, tx, key)
		if err != nil {
			return err
		}
		if cr.State == nil || cr.State.AnchorLen == 0 || len(cr.Members) != 1 {
			t.Fatalf("cluster %s before the recompute: %+v; want a state with anchor terms and one member", key, cr)
		}
		before := reads()
		if err := ix.recompute(ctx, tx, key); err != nil {
			return err
		}
		sent = reads() - before
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sent != 3 {
		t.Errorf("the recompute sent %d read requests, want 3 (%v)", sent, c.RPCsByType())
	}
}
