package webindex_test

import (
	"context"
	"fmt"
	"testing"
)

// Pitfall: a page everyone links to turns its counters into a collision
// storm when every linking page's observer updates them. Here 300 pages
// linking to one hub are indexed by 16 concurrent observers; the hub's
// inlinks and count must be exact, and transactions must almost never
// conflict (with a shared counter, most of the 300 would).
func TestHotPageIsNoCollisionHotSpot(t *testing.T) {
	e := newEnv(t)
	const n = 300
	pages := map[string]string{"http://hub.example/": "<title>Hub</title>the hub"}
	for i := range n {
		pages[fmt.Sprintf("http://s%d.example/", i)] = fmt.Sprintf(`page %d <a href="http://hub.example/">hub %d</a>`, i, i%3)
	}
	e.load(pages)
	e.settle()
	pv, err := e.ix.Page(context.Background(), e.db, "http://hub.example/")
	if err != nil {
		t.Fatal(err)
	}
	if pv.Rank != n || pv.InboundCount != n || len(pv.Inlinks) != n {
		t.Fatalf("hub: rank %d, inbound %d, %d inlinks; want %d", pv.Rank, pv.InboundCount, len(pv.Inlinks), n)
	}
	s := e.fw.Stats()
	t.Logf("%d transactions committed, %d conflicts", s.Committed, s.Conflicts)
	if c := s.Conflicts; c > n/10 {
		t.Errorf("%d conflicts indexing %d pages that link to one hub", c, n)
	}
}
