package webindex

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"
)

// Anchor text statistics. A cluster's anchor field counts, for each term,
// the distinct pages outside the cluster whose links into it have the term
// in their anchor text. They change with every link added, removed or
// re-anchored, mostly on popular pages, so they are kept like inlink
// counts: each link's change is queued on its target's row with the
// inlink count's change (one in.q cell: the count's delta and each term's),
// and folded by the target's cluster recompute (countInlinks), which posts
// the cluster's anchor terms. No cell is written by two pages.
var (
	// anchorTermsCol is a URL's folded anchor term counts (encoded term
	// counts): for each term, its sources whose anchors hold it. It is
	// folded with inlinkCount, from the same queued cells.
	anchorTermsCol = framework.Column{Family: "page", Qualifier: "anchor-terms"}
	// clusterAnchors is the anchor term counts posted for a cluster
	// (encoded term counts, each rounded by scoring.AnchorCount): what its
	// anchor postings hold, diffed by the next recompute.
	clusterAnchors = framework.Column{Family: "cluster", Qualifier: "anchors"}
	// anchorFamily holds a term's anchor postings in TermsTable:
	// qualifier = cluster key, value = encodePosting(sources).
	anchorFamily = "anchor"
)

// termCountsVersion tags an encoded term count list.
const termCountsVersion = 1

// encodeTermCounts encodes counts as its terms in order, each with its
// count (zigzag varint, so that a delta may be negative).
func encodeTermCounts(counts map[string]int64) []byte {
	terms := slices.Sorted(maps.Keys(counts))
	n := 1 + binary.MaxVarintLen64
	for _, t := range terms {
		n += 2*binary.MaxVarintLen64 + len(t)
	}
	b := make([]byte, 0, n)
	b = append(b, termCountsVersion)
	b = binary.AppendUvarint(b, uint64(len(terms)))
	for _, t := range terms {
		b = appendString(b, t)
		b = binary.AppendVarint(b, counts[t])
	}
	return b
}

// decodeTermCounts adds the counts encoded in b to into (made if nil) and
// returns it.
func decodeTermCounts(b []byte, into map[string]int64) (map[string]int64, error) {
	if len(b) == 0 || b[0] != termCountsVersion {
		return nil, fmt.Errorf("%w: term counts have unknown version", ErrCorrupt)
	}
	d := newDecoder(b[1:])
	if err := d.termCounts(into); err != nil {
		return nil, err
	}
	if d.Err() != nil || d.Len() != 0 {
		return nil, fmt.Errorf("%w: term counts of %d bytes are truncated or have trailing bytes", ErrCorrupt, len(b))
	}
	return into, nil
}

// termCounts reads a uvarint count, then that many (term, varint) pairs,
// adding them to into.
func (d *decoder) termCounts(into map[string]int64) error {
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

// encodeInlinkDelta is a queued inlink change: the count's delta, then
// each term's (encodeTermCounts without the version).
func encodeInlinkDelta(count int64, terms map[string]int64) []byte {
	b := binary.AppendVarint([]byte{inlinkDeltaVersion}, count)
	return append(b, encodeTermCounts(terms)[1:]...)
}

// decodeInlinkDelta returns a queued change's count delta and, when terms
// is not nil, adds its term deltas to terms.
func decodeInlinkDelta(b []byte, terms map[string]int64) (int64, error) {
	if len(b) == 0 || b[0] != inlinkDeltaVersion {
		return strconv.ParseInt(string(b), 10, 64)
	}
	d := newDecoder(b[1:])
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

// anchorTermSet returns the distinct terms of the anchors encoded in an
// inlink cell's value (encodeAnchors): what one source adds to its
// target's anchor field.
func anchorTermSet(encoded string) (map[string]bool, error) {
	as, err := decodeAnchors([]byte(encoded))
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, a := range as {
		extract.Tokenize(a, func(t string, _ extract.TokenKind, _ int) bool {
			set[t] = true
			return true
		})
	}
	return set, nil
}

// anchorTermDelta is the change of a target's anchor term counts when a
// source's inlink cell goes from before to after ("" for none... absent:
// had false).
func anchorTermDelta(before string, had bool, after string, has bool) (map[string]int64, error) {
	d := map[string]int64{}
	if had {
		set, err := anchorTermSet(before)
		if err != nil {
			return nil, err
		}
		for t := range set {
			d[t]--
		}
	}
	if has {
		set, err := anchorTermSet(after)
		if err != nil {
			return nil, err
		}
		for t := range set {
			if d[t]++; d[t] == 0 {
				delete(d, t)
			}
		}
	}
	return d, nil
}

// postable returns the anchor term counts a cluster posts for its source
// counts: each rounded down to a power of two (scoring.AnchorCount), so
// that a popular page's postings change when its sources double, not
// with every new link.
func postable(sources map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(sources))
	for t, n := range sources {
		if n > 0 {
			out[t] = scoring.AnchorCount(n)
		}
	}
	return out
}

// anchorSum is the anchor field's length: the sum of its term counts.
func anchorSum(counts map[string]int64) int64 {
	var n int64
	for _, c := range counts {
		n += c
	}
	return n
}

// postAnchors brings the anchor postings of the cluster key from old to
// next (term → sources; an absent term has none) and records next as
// posted. It reports whether anything changed; the caller writes the
// cluster's state, which guards the postings.
func postAnchors(tx *framework.Txn, key string, old, next map[string]int64) (bool, error) {
	changed := false
	for t, n := range next {
		if old[t] == n {
			continue
		}
		changed = true
		if err := tx.Set(TermsTable, []byte(t), framework.Column{Family: anchorFamily, Qualifier: key}, encodePosting(n)); err != nil {
			return false, err
		}
	}
	for t := range old {
		if _, ok := next[t]; ok {
			continue
		}
		changed = true
		if err := tx.Delete(TermsTable, []byte(t), framework.Column{Family: anchorFamily, Qualifier: key}); err != nil {
			return false, err
		}
	}
	if !changed {
		return false, nil
	}
	row := []byte(key)
	if len(next) == 0 {
		return true, tx.Delete(ClustersTable, row, clusterAnchors)
	}
	return true, tx.Set(ClustersTable, row, clusterAnchors, encodeTermCounts(next))
}

// outsideAnchors counts, for each term, the distinct sources among inlinks
// (a cluster's links from outside it, sorted by source) whose anchors
// hold the term: the anchor field of a cluster with several members,
// whose sources may link to more than one of them.
func outsideAnchors(inlinks []Inlink) map[string]int64 {
	counts := map[string]int64{}
	for i := 0; i < len(inlinks); {
		j := i
		set := map[string]bool{}
		for ; j < len(inlinks) && inlinks[j].Source == inlinks[i].Source; j++ {
			for _, a := range inlinks[j].Anchors {
				extract.Tokenize(a, func(t string, _ extract.TokenKind, _ int) bool {
					set[t] = true
					return true
				})
			}
		}
		for t := range set {
			counts[t]++
		}
		i = j
	}
	return counts
}
