package webindex

import (
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// anchorTermSet returns the distinct terms of the anchors encoded in an
// inlink cell's value (EncodeAnchors): what one source adds to its
// target's anchor field.
func anchorTermSet(encoded string) (map[string]bool, error) {
	as, err := schema.DecodeAnchors([]byte(encoded))
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
		if err := tx.Set(schema.TermsTable, []byte(t), framework.Column{Family: schema.AnchorFamily, Qualifier: key}, schema.EncodePosting(n)); err != nil {
			return false, err
		}
	}
	for t := range old {
		if _, ok := next[t]; ok {
			continue
		}
		changed = true
		if err := tx.Delete(schema.TermsTable, []byte(t), framework.Column{Family: schema.AnchorFamily, Qualifier: key}); err != nil {
			return false, err
		}
	}
	if !changed {
		return false, nil
	}
	row := []byte(key)
	if len(next) == 0 {
		return true, tx.Delete(schema.ClustersTable, row, schema.ClusterAnchors)
	}
	return true, tx.Set(schema.ClustersTable, row, schema.ClusterAnchors, schema.EncodeTermCounts(next))
}
