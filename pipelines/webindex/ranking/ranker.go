package ranking

import (
	"context"
	"math"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// Ranker scores a page for choosing its cluster's canonical. The index
// calls it inside a cluster recomputation with the number of distinct
// loaded pages linking to url; a ranker with its own notion of rank (a
// PageRank maintained by other observers) reads it through tx. Rank must be
// deterministic for a given snapshot: the canonical is recomputed whenever
// the cluster changes and must not flap.
type Ranker interface {
	Rank(ctx context.Context, tx *framework.Txn, url string, inlinks int64) (int64, error)
}

// InlinkCount ranks a URL by the number of distinct loaded pages linking to
// it: the stand-in for PageRank the index uses by default.
type InlinkCount struct{}

// Rank implements Ranker.
func (InlinkCount) Rank(_ context.Context, _ *framework.Txn, _ string, inlinks int64) (int64, error) {
	return inlinks, nil
}

// PageRank is maintained by local pushes (Gauss–Southwell iteration) when
// webindex.Options.PageRank is set; see the web index's package documentation, section PageRank,
// for the definition and the error bound.

// Damping is the PageRank damping factor α: the probability that the
// random surfer follows a link rather than jumping to a random page.
const Damping = 0.85

// PageRankRanker ranks a page by the PageRank the index maintains (Options
// .PageRank must be set): round(PageRankOf × PageRankScale). Ranks of pages
// whose PageRanks are closer than the error bound may come out in either
// order. An Index using it recomputes a page's cluster whenever the page's
// rank estimate changes, so that canonicals follow the ranks.
type PageRankRanker struct{}

// Rank implements Ranker.
func (PageRankRanker) Rank(ctx context.Context, tx *framework.Txn, url string, _ int64) (int64, error) {
	r, err := schema.PageRankOf(ctx, tx, url)
	if err != nil {
		return 0, err
	}
	return int64(math.Round(r * schema.PageRankScale)), nil
}
