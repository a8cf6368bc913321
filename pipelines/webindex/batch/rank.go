package batch

import "github.com/trickle-dev/trickle/pipelines/webindex/extract"

// Ranker scores URLs for choosing each duplicate cluster's canonical. It
// sees all loaded pages at once, so a global algorithm such as PageRank can
// implement it. Scores are integers so that comparisons are exact; a
// fractional ranker should scale and round deterministically.
type Ranker interface {
	// Rank returns the rank of every loaded page's URL (the keys of pages).
	// A URL missing from the result has rank 0.
	Rank(pages map[string]*extract.Page) map[string]int64
}

// InlinkCount is the default Ranker: the rank of a URL is the number of
// distinct loaded pages, other than the page itself, that link to it.
type InlinkCount struct{}

// Rank implements Ranker.
func (InlinkCount) Rank(pages map[string]*extract.Page) map[string]int64 {
	sources := map[string]map[string]bool{} // target -> distinct sources
	for src, p := range pages {
		for _, l := range p.Links {
			if l.Target == src {
				continue
			}
			if sources[l.Target] == nil {
				sources[l.Target] = map[string]bool{}
			}
			sources[l.Target][src] = true
		}
	}
	ranks := make(map[string]int64, len(pages))
	for u := range pages {
		ranks[u] = int64(len(sources[u]))
	}
	return ranks
}
