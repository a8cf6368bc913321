package webindex

import (
	"context"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/framework/notify"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/store"
)

// TestARelayReachesTheClusterItsTargetMovedTo: a page's run links to a
// target while the target's own run moves it to another cluster and that
// cluster is recomputed, all before the page's run commits; under
// snapshot isolation neither run sees the other. The relay, which runs
// after, must notify the cluster the target is in now (the page's run saw
// the old one), so that the new cluster counts the inlink.
func TestARelayReachesTheClusterItsTargetMovedTo(t *testing.T) {
	target := &extract.Page{URL: "http://t.example/", Text: "alpha words"}
	ctx, ix, reg, db, put := indexedThenStopped(t, target)

	// From here on the test runs each notification itself, through a
	// registry whose page observer, on the source's first run, lets the
	// target's move and the new cluster's recompute commit before it
	// returns.
	src := &extract.Page{URL: "http://s.example/", Text: "source words", Links: []extract.Link{{Target: target.URL, Anchor: "to t"}}}
	moved := &extract.Page{URL: target.URL, Text: "beta words"}
	var p *notify.Processor
	process := func(table, row string, col framework.Column) notify.Outcome {
		t.Helper()
		out, err := p.Process(ctx, notify.Notification{Table: table, Row: []byte(row), Column: col})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	interleaved := 0
	hooked := framework.NewRegistry()
	for _, o := range reg.Observers() {
		if o.Name == pageObserver {
			fn := o.Fn
			o.Fn = func(ctx context.Context, tx *framework.Txn, row []byte, col framework.Column) error {
				if err := fn(ctx, tx, row, col); err != nil || string(row) != src.URL {
					return err
				}
				if interleaved++; interleaved == 1 {
					put(moved)
					process(schema.PagesTable, target.URL, schema.Doc)
					process(schema.ClustersTable, schema.ClusterKey(moved), schema.ClusterDirty)
				}
				return nil
			}
		}
		if err := hooked.Register(o); err != nil {
			t.Fatal(err)
		}
	}
	p = notify.NewProcessor(db, hooked)
	put(src)
	if out := process(schema.PagesTable, src.URL, schema.Doc); out != notify.OutcomeRan || interleaved != 1 {
		t.Fatalf("the source's run: %s after %d attempts, want one that ran", out, interleaved)
	}
	if out := process(schema.PagesTable, src.URL, outlinksChanged); out != notify.OutcomeRan {
		t.Fatalf("the relay: %s, want a run", out)
	}
	if out := process(schema.ClustersTable, schema.ClusterKey(moved), schema.ClusterDirty); out != notify.OutcomeRan {
		t.Fatalf("the new cluster after the relay: %s; the relay did not notify it", out)
	}
	pv, err := ix.Page(ctx, db, target.URL)
	if err != nil {
		t.Fatal(err)
	}
	if pv.InboundCount != 1 {
		t.Fatalf("the moved target's inbound count is %d, want 1", pv.InboundCount)
	}
}

// TestRecomputesWaitOutTheDelay: a cluster's recompute is held back for
// RecomputeDelay (1s by default, none when negative), and no other
// observer of the index is.
func TestRecomputesWaitOutTheDelay(t *testing.T) {
	for _, c := range []struct {
		opts *Options
		want time.Duration
	}{{nil, time.Second}, {&Options{RecomputeDelay: 3 * time.Second}, 3 * time.Second}, {&Options{RecomputeDelay: -1}, 0}} {
		ix, err := New(c.opts)
		if err != nil {
			t.Fatal(err)
		}
		reg := framework.NewRegistry()
		if err := ix.Register(reg); err != nil {
			t.Fatal(err)
		}
		for _, o := range reg.Observers() {
			want := time.Duration(0)
			if o.Name == clusterObserver {
				want = c.want
			}
			if o.Delay != want {
				t.Errorf("options %+v: %s is delayed %v, want %v", c.opts, o.Name, o.Delay, want)
			}
		}
	}
}

// TestARelayForwardsEveryRunsTargets: a page changes twice before its
// relay runs, linking to one target and then to another as well (the
// second run changes the second target's inlinks only); the relay
// forwards both runs' changes, so that both targets' clusters count the
// inlink.
func TestARelayForwardsEveryRunsTargets(t *testing.T) {
	one := &extract.Page{URL: "http://one.example/", Text: "first target"}
	two := &extract.Page{URL: "http://two.example/", Text: "second target"}
	ctx, ix, reg, db, put := indexedThenStopped(t, one, two)
	p := notify.NewProcessor(db, reg)
	process := func(table, row string, col framework.Column) notify.Outcome {
		t.Helper()
		out, err := p.Process(ctx, notify.Notification{Table: table, Row: []byte(row), Column: col})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	src := "http://s.example/"
	put(&extract.Page{URL: src, Text: "source", Links: []extract.Link{{Target: one.URL, Anchor: "one"}}})
	process(schema.PagesTable, src, schema.Doc)
	put(&extract.Page{URL: src, Text: "source", Links: []extract.Link{{Target: one.URL, Anchor: "one"}, {Target: two.URL, Anchor: "two"}}})
	process(schema.PagesTable, src, schema.Doc)
	if out := process(schema.PagesTable, src, outlinksChanged); out != notify.OutcomeRan {
		t.Fatalf("the relay: %s, want a run", out)
	}
	for _, target := range []*extract.Page{one, two} {
		if out := process(schema.ClustersTable, schema.ClusterKey(target), schema.ClusterDirty); out != notify.OutcomeRan {
			t.Errorf("%s's cluster after the relay: %s; the relay did not notify it", target.URL, out)
		}
	}
	for target, want := range map[string]int64{one.URL: 1, two.URL: 1} {
		pv, err := ix.Page(ctx, db, target)
		if err != nil {
			t.Fatal(err)
		}
		if pv.InboundCount != want {
			t.Errorf("%s: inbound count %d, want %d", target, pv.InboundCount, want)
		}
	}
}

// indexedThenStopped indexes pages in a fresh deployment (no recompute
// delay), then stops its observers, so that the test runs each
// notification itself; put loads a page.
func indexedThenStopped(t *testing.T, pages ...*extract.Page) (ctx context.Context, ix *Index, reg *framework.Registry, db *framework.DB, put func(*extract.Page)) {
	t.Helper()
	return indexedOnThenStopped(t, nil, pages...)
}

// indexedOnThenStopped is indexedThenStopped on the store st (nil: the
// test environment's default).
func indexedOnThenStopped(t *testing.T, st store.Store, pages ...*extract.Page) (ctx context.Context, ix *Index, reg *framework.Registry, db *framework.DB, put func(*extract.Page)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	ix, err := New(&Options{RecomputeDelay: -1})
	if err != nil {
		t.Fatal(err)
	}
	reg = framework.NewRegistry()
	if err := ix.Register(reg); err != nil {
		t.Fatal(err)
	}
	env, err := frameworktest.Start(ctx, reg, &frameworktest.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	db = env.DB()
	put = func(p *extract.Page) {
		t.Helper()
		if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			_, err := PutPage(ctx, tx, p)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pages {
		put(p)
	}
	if err := env.WaitForObservers(ctx); err != nil {
		t.Fatal(err)
	}
	env.StopObservers()
	return ctx, ix, reg, db, put
}
