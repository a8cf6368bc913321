package schema

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"
)

// Anchor text statistics. A cluster's anchor field counts, for each term,
// the distinct pages outside the cluster whose links into it have the term
// in their anchor text. They change with every link added, removed or
// re-anchored, mostly on popular pages, so they are kept like inlink
// counts: each link's change is queued on its target's row with the
// inlink count's change (one in.q cell: the count's delta and each term's),
// and folded by the target's cluster recompute (CountInlinks), which posts
// the cluster's anchor terms. No cell is written by two pages.
var (
	// AnchorTermsCol is a URL's folded anchor term counts (encoded term
	// counts): for each term, its sources whose anchors hold it. It is
	// folded with InlinkCountCol, from the same queued cells.
	AnchorTermsCol = framework.Column{Family: "page", Qualifier: "anchor-terms"}
	// ClusterAnchors is the anchor term counts posted for a cluster
	// (encoded term counts, each rounded by scoring.AnchorCount): what its
	// anchor postings hold, diffed by the next recompute.
	ClusterAnchors = framework.Column{Family: "cluster", Qualifier: "anchors"}
	// AnchorFamily holds a term's anchor postings in TermsTable:
	// qualifier = cluster key, value = EncodePosting(sources).
	AnchorFamily = "anchor"
)

// termCountsVersion tags an encoded term count list.
const termCountsVersion = 1

// EncodeTermCounts encodes counts as its terms in order, each with its
// count (zigzag varint, so that a delta may be negative).
func EncodeTermCounts(counts map[string]int64) []byte {
	terms := slices.Sorted(maps.Keys(counts))
	n := 1 + binary.MaxVarintLen64
	for _, t := range terms {
		n += 2*binary.MaxVarintLen64 + len(t)
	}
	b := make([]byte, 0, n)
	b = append(b, termCountsVersion)
	b = binary.AppendUvarint(b, uint64(len(terms)))
	for _, t := range terms {
		b = AppendString(b, t)
		b = binary.AppendVarint(b, counts[t])
	}
	return b
}

// DecodeTermCounts adds the counts encoded in b to into (made if nil) and
// returns it.
func DecodeTermCounts(b []byte, into map[string]int64) (map[string]int64, error) {
	if len(b) == 0 || b[0] != termCountsVersion {
		return nil, fmt.Errorf("%w: term counts have unknown version", ErrCorrupt)
	}
	d := NewDecoder(b[1:])
	if err := d.termCounts(into); err != nil {
		return nil, err
	}
	if d.Err() != nil || d.Len() != 0 {
		return nil, fmt.Errorf("%w: term counts of %d bytes are truncated or have trailing bytes", ErrCorrupt, len(b))
	}
	return into, nil
}

// TermCounts reads a uvarint count, then that many (term, varint) pairs,
// adding them to into.
func (d *Decoder) termCounts(into map[string]int64) error {
	n := d.Uvarint()
	if n > uint64(d.Len()) {
		return fmt.Errorf("%w: %d term counts in %d bytes", ErrCorrupt, n, d.Len())
	}
	for range n {
		t := d.String()
		into[t] += d.Varint()
	}
	return nil
}

// inlinkDeltaVersion tags a queued inlink change (in.q) that carries its
// anchor terms. A change queued before anchor statistics existed is a
// decimal count ("+1", "-1") with no terms.
const inlinkDeltaVersion = 1

// EncodeInlinkDelta is a queued inlink change: the count's delta, then
// each term's (EncodeTermCounts without the version).
func EncodeInlinkDelta(count int64, terms map[string]int64) []byte {
	b := binary.AppendVarint([]byte{inlinkDeltaVersion}, count)
	return append(b, EncodeTermCounts(terms)[1:]...)
}

// DecodeInlinkDelta returns a queued change's count delta and, when terms
// is not nil, adds its term deltas to terms.
func DecodeInlinkDelta(b []byte, terms map[string]int64) (int64, error) {
	if len(b) == 0 || b[0] != inlinkDeltaVersion {
		return strconv.ParseInt(string(b), 10, 64)
	}
	d := NewDecoder(b[1:])
	n := d.Varint()
	if terms == nil {
		return n, d.Err()
	}
	if err := d.termCounts(terms); err != nil {
		return 0, err
	}
	if d.Err() != nil || d.Len() != 0 {
		return 0, fmt.Errorf("%w: inlink delta of %d bytes is truncated or has trailing bytes", ErrCorrupt, len(b))
	}
	return n, nil
}

// Postable returns the anchor term counts a cluster posts for its source
// counts: each rounded down to a power of two (scoring.AnchorCount), so
// that a popular page's postings change when its sources double, not
// with every new link.
func Postable(sources map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(sources))
	for t, n := range sources {
		if n > 0 {
			out[t] = scoring.AnchorCount(n)
		}
	}
	return out
}

// AnchorSum is the anchor field's length: the sum of its term counts.
func AnchorSum(counts map[string]int64) int64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}
