package batch_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
)

// TestInvariants checks properties that follow from the semantics on a
// generated corpus, each stated independently of how Compute works.
func TestInvariants(t *testing.T) {
	pages, err := sample.Generate(3, 400).Pages()
	if err != nil {
		t.Fatal(err)
	}
	ix := batch.Compute(pages)
	if ix.Len() != len(pages) {
		t.Fatalf("Len = %d, want %d", ix.Len(), len(pages))
	}
	canonicals := 0
	for _, u := range ix.URLs() {
		p, _ := ix.Page(u)
		c, ok := ix.Page(p.Canonical)
		if !ok || c.Canonical != c.URL {
			t.Fatalf("%s: canonical %s is not a canonical", u, p.Canonical)
		}
		if p.Canonical == u {
			canonicals++
		}
		members := append([]string{u}, p.Duplicates...)
		for _, m := range members {
			q, _ := ix.Page(m)
			if pages[m].Text != pages[u].Text || (pages[u].Text == "" && m != u) {
				t.Errorf("%s and %s clustered with different or empty text", u, m)
			}
			if q.Canonical != p.Canonical || q.InboundCount != p.InboundCount {
				t.Errorf("%s and %s disagree on canonical or inbound count", u, m)
			}
			if q.Rank > c.Rank {
				t.Errorf("%s outranks its canonical %s", m, c.URL)
			}
		}
		sources := map[string]bool{}
		for _, l := range p.Inlinks {
			sources[l.Source] = true
			if !slices.Contains(members, l.Target) || slices.Contains(members, l.Source) {
				t.Errorf("%s: bad inlink %+v", u, l)
			}
		}
		if int64(len(sources)) != p.InboundCount {
			t.Errorf("%s: %d distinct sources, inbound count %d", u, len(sources), p.InboundCount)
		}
	}
	top := ix.Top(ix.Len())
	if len(top) != canonicals || !slices.IsSortedFunc(top, func(a, b batch.Result) int {
		if a.InboundCount != b.InboundCount {
			return int(b.InboundCount - a.InboundCount)
		}
		return strings.Compare(a.URL, b.URL)
	}) {
		t.Errorf("Top lists %d of %d canonicals, or out of order", len(top), canonicals)
	}
	total, res := ix.Search(sample.Word(0), ix.Len())
	if total == 0 || total != len(res) || total > canonicals {
		t.Errorf("Search(common word) = %d, %d results", total, len(res))
	}
}
