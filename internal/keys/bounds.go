package keys

import (
	"bytes"
	"slices"
)

// OneRow reports whether the row range [start, end) of a scan holds the
// one row start: end is start followed by a zero byte, the next possible
// row.
func OneRow(start, end []byte) bool {
	return start != nil && len(end) == len(start)+1 && end[len(end)-1] == 0 && bytes.HasPrefix(end, start)
}

// SuffixBounds returns the key range, within the row with encoded prefix
// rowPrefix, that holds every column whose escaped suffix (family, or
// family and qualifier) starts with one of targets, sorted. A scan of one
// row with a column filter iterates only there: it starts at the first
// wanted column rather than at the row's first one and seeking on from
// it, and it ends at the last one's end rather than after a seek past the
// row.
func SuffixBounds(rowPrefix []byte, targets [][]byte) (lower, upper []byte) {
	lower = append(slices.Clip(rowPrefix), targets[0]...)
	for _, t := range targets {
		// A family's range contains its columns', so the largest end is
		// not always the last target's.
		if end := PrefixSuccessor(append(slices.Clip(rowPrefix), t...)); upper == nil || bytes.Compare(end, upper) > 0 {
			upper = end
		}
	}
	return lower, upper
}
