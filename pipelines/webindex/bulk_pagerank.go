package webindex

import (
	"context"
	"math"
	"slices"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// bulkPageRank computes the PageRank state the observers would converge to
// for pages (urls: their sorted keys), for a bulk load: each page's
// outlinks to loaded pages, and the estimate x̂ of a Jacobi iteration
// x ← (1-α)·1 + α·Hᵀx run until its step, which is exactly the residual
// r = (1-α)·1 + α·Hᵀx̂ - x̂ of the estimate, is far below the tolerance
// everywhere. The estimate and that residual are stored together, so the
// identity the push observers keep holds from the start, no push is due,
// and later changes are corrected against it as if the pages had been
// loaded one by one.
func bulkPageRank(ctx context.Context, pages map[string]*extract.Page, urls []string, tolerance float64) (map[string]*prState, error) {
	id := make(map[string]int, len(urls))
	for i, u := range urls {
		id[u] = i
	}
	out := make([][]int, len(urls))
	states := make(map[string]*prState, len(urls))
	for i, u := range urls {
		var targets []string
		for t := range anchors(pages[u]) {
			if _, loaded := id[t]; loaded && t != u {
				targets = append(targets, t)
			}
		}
		slices.Sort(targets)
		if len(targets) > prMaxOutlinks {
			targets = targets[:prMaxOutlinks]
		}
		for _, t := range targets {
			out[i] = append(out[i], id[t])
		}
		states[u] = &prState{Loaded: true, Out: targets}
	}
	x := make([]float64, len(urls))
	next := make([]float64, len(urls))
	for i := range x {
		x[i] = 1 - Damping
	}
	// The step shrinks by α per iteration; stop well inside ε, so that a
	// bulk-loaded index is as exact as a settled incremental one can be.
	limit := tolerance / 1024
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i := range next {
			next[i] = 1 - Damping
		}
		for i, ts := range out {
			if len(ts) == 0 {
				continue
			}
			share := Damping * x[i] / float64(len(ts))
			for _, t := range ts {
				next[t] += share
			}
		}
		var step float64
		for i := range x {
			step = max(step, math.Abs(next[i]-x[i]))
		}
		if step <= limit {
			for i, u := range urls {
				states[u].Rank, states[u].Residual = x[i], next[i]-x[i]
			}
			return states, nil
		}
		x, next = next, x
	}
}

// setBulkPageRank passes the PageRank cells of a bulk-loaded page's row to
// set: its state st, and the mark that its sources count it as loaded.
func setBulkPageRank(row []byte, st *prState, set setFunc) error {
	if err := set(PagesTable, row, prStateCol, encodePRState(st)); err != nil {
		return err
	}
	return set(PagesTable, row, prAnnounced, nil)
}

// bulkRanker ranks by bulk-computed PageRank estimates where the index's
// Ranker is PageRankRanker: the import is not readable while it is
// computed.
type bulkRanker struct {
	states map[string]*prState
}

func (r bulkRanker) Rank(_ context.Context, _ *framework.Txn, url string, _ int64) (int64, error) {
	return int64(math.Round(r.states[url].Rank * PageRankScale)), nil
}
