package webindex_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/internal/indextest"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// Pitfall: a page everyone links to turns its counters into a collision
// storm when every linking page's observer updates them. Here 300 pages
// linking to one hub are indexed by 16 concurrent observers; the hub's
// inlinks and count must be exact, and transactions must almost never
// conflict (with a shared counter, most of the 300 would).
func TestHotPageIsNoCollisionHotSpot(t *testing.T) {
	e := indextest.New(t)
	const n = 300
	pages := map[string]string{"http://hub.example/": "<title>Hub</title>the hub"}
	for i := range n {
		pages[fmt.Sprintf("http://s%d.example/", i)] = fmt.Sprintf(`page %d <a href="http://hub.example/">hub %d</a>`, i, i%3)
	}
	e.Load(pages)
	e.Settle()
	pv, err := e.Index.Page(context.Background(), e.DB, "http://hub.example/")
	if err != nil {
		t.Fatal(err)
	}
	if pv.Rank != n || pv.InboundCount != n || len(pv.Inlinks) != n {
		t.Fatalf("hub: rank %d, inbound %d, %d inlinks; want %d", pv.Rank, pv.InboundCount, len(pv.Inlinks), n)
	}
	s := e.FW.Stats()
	t.Logf("%d transactions committed, %d conflicts", s.Committed, s.Conflicts)
	if c := s.Conflicts; c > n/10 {
		t.Errorf("%d conflicts indexing %d pages that link to one hub", c, n)
	}
}

// Queued inlink changes are folded into the count whoever counts them for
// an observer: a loaded page's by its cluster's recompute, a page that is
// never loaded by its inlinks observer. Neither queue grows with the
// number of links (a page that only counted would step over all of them
// on every count).
func TestInlinkQueuesAreFolded(t *testing.T) {
	e := indextest.New(t)
	const n = 200
	pages := map[string]string{"http://hub.example/": "<title>Hub</title>the hub"}
	for i := range n {
		pages[fmt.Sprintf("http://s%d.example/", i)] = fmt.Sprintf(`page %d <a href="http://hub.example/">hub</a> <a href="http://missing.example/">gone</a>`, i)
	}
	e.Load(pages)
	e.Settle()
	for _, u := range []string{"http://hub.example/", "http://missing.example/"} {
		queued := 0
		if err := e.DB.View(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
			queued = 0
			for _, err := range tx.Scan(ctx, framework.ScanOptions{Table: schema.PagesTable, Start: []byte(u), End: []byte(u + "\x00"), Families: []string{"in.q"}}) {
				if err != nil {
					return err
				}
				queued++
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if queued >= schema.FoldAt {
			t.Errorf("%s: %d inlink changes still queued after %d links were indexed", u, queued, n)
		}
	}
	pv, err := e.Index.Page(context.Background(), e.DB, "http://hub.example/")
	if err != nil {
		t.Fatal(err)
	}
	if pv.InboundCount != n {
		t.Fatalf("hub: inbound %d, want %d", pv.InboundCount, n)
	}
}
