// Package ranking owns what represents a duplicate cluster: the Ranker
// that ranks its members (InlinkCount, or PageRankRanker for the PageRank
// the index maintains), the order that picks the canonical among them
// (Better: higher rank, then shorter URL, then smaller URL), and a
// cluster's View — its canonical, ranks, inbound count and the inlinks from
// outside it — computed from one snapshot.
//
// It imports schema, whose cells a view is read from, and nothing else of
// the index: the cluster observer, the queries and the bulk load choose
// canonicals by the same rule.
package ranking
