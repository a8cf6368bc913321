package webindex

import (
	"context"
	"fmt"
	"maps"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// observeCluster recomputes a cluster's derived state from its members and
// their inlinks, and moves its top-list entry and search postings to match.
// Many page changes collapse into one run (the notification is weak), and a
// run recomputes from scratch rather than applying deltas, so it is right
// however often it runs. Two concurrent runs that change something both
// write the state cell, so at most one of them commits.
func (ix *Index) observeCluster(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	return ix.recompute(ctx, tx, string(row))
}

// recompute brings the derived state of the cluster key up to date: its
// state, top-list and site entries, its search postings (with term
// frequencies) and, through queued changes, the corpus statistics.
func (ix *Index) recompute(ctx context.Context, tx *framework.Txn, key string) error {
	row := []byte(key)
	cr, err := schema.ReadClusterRow(ctx, tx, key)
	if err != nil {
		return err
	}
	old := cr.State
	v, err := ranking.ViewOf(ctx, tx, ix.opts.Ranker, cr.Members, false, true, !ix.knobs.noRows)
	if err != nil {
		return err
	}
	if len(v.Members) == 0 {
		if old == nil {
			return nil
		}
		return unpost(ctx, tx, key, old)
	}

	next := &schema.State{Canonical: v.Canonical, Inbound: v.Inbound, Rank: v.Ranks[v.Canonical], Scored: true}
	var counts map[string]int64 // the text's terms, when (re)posting them
	if old == nil || !old.Scored {
		// A new cluster, or one posted before postings held frequencies:
		// post its terms, taken from the text of a member whose loaded
		// document still has the cluster's text. If none has, every
		// member changed since it was indexed, and each one's page
		// observer, still to run, will notify the cluster again.
		found := false
		for _, m := range v.Members {
			doc, err := schema.ReadDoc(ctx, tx, m, schema.Doc)
			if err != nil {
				return err
			}
			if doc != nil && schema.ClusterKey(doc) == key {
				counts, next.Words = schema.TermCounts(doc.Text)
				found = true
				break
			}
		}
		if !found {
			return nil
		}
	} else {
		next.Words = old.Words
	}
	// The members' rows of the canonical table, before the state's early
	// out: a member's rank or title may change while the state does not.
	if err := ix.updateRows(ctx, tx, v); err != nil {
		return err
	}
	// The anchor field: only a cluster with text is searched, so only
	// one with text posts its anchor terms.
	var anchors, oldAnchors map[string]int64
	if next.Words > 0 {
		anchors = schema.Postable(v.Anchors)
	}
	if old != nil && old.AnchorLen > 0 {
		oldAnchors = cr.Anchors
	}
	next.AnchorLen = schema.AnchorSum(anchors)
	if counts == nil && old.Canonical == next.Canonical && old.Inbound == next.Inbound && old.Rank == next.Rank &&
		old.AnchorLen == next.AnchorLen && maps.Equal(oldAnchors, anchors) {
		return nil
	}
	var d schema.Corpus // the change of the corpus statistics
	if counts != nil {
		if d, err = post(tx, key, counts, next.Words); err != nil {
			return err
		}
	}
	if _, err := postAnchors(tx, key, oldAnchors, anchors); err != nil {
		return err
	}
	if d != (schema.Corpus{}) {
		if err := schema.QueueCorpus(tx, "cluster/"+key, d); err != nil {
			return err
		}
	}
	if old != nil {
		if err := schema.DeleteListEntries(tx, key, old); err != nil {
			return err
		}
	}
	if err := schema.SetListEntries(tx, key, next); err != nil {
		return err
	}
	return tx.Set(schema.ClustersTable, row, schema.ClusterState, schema.EncodeState(next))
}

// postedAnchors reads the anchor term counts posted for the cluster key.
func postedAnchors(ctx context.Context, tx *framework.Txn, key string) (map[string]int64, error) {
	b, found, err := tx.Lookup(ctx, schema.ClustersTable, []byte(key), schema.ClusterAnchors)
	if err != nil || !found {
		return nil, err
	}
	m, err := schema.DecodeTermCounts(b, map[string]int64{})
	if err != nil {
		return nil, fmt.Errorf("cluster %s anchors: %w", key, err)
	}
	return m, nil
}

// post writes the postings of the cluster key (term frequencies counts,
// words words) and its term list, and returns the change of the corpus
// statistics that comes with a new cluster.
func post(tx *framework.Txn, key string, counts map[string]int64, words int64) (schema.Corpus, error) {
	terms := schema.SortedTerms(counts)
	for _, t := range terms {
		if err := tx.Set(schema.TermsTable, []byte(t), framework.Column{Family: schema.PostingFamily, Qualifier: key}, schema.EncodePosting(counts[t])); err != nil {
			return schema.Corpus{}, err
		}
	}
	d := schema.Corpus{Clusters: 1}
	if len(terms) > 0 {
		if err := tx.Set(schema.ClustersTable, []byte(key), schema.ClusterTerms, schema.EncodeTerms(terms)); err != nil {
			return schema.Corpus{}, err
		}
		d.Docs, d.Words = 1, words
	}
	return d, nil
}

// unpost removes the cluster key, whose last state is old, from the index
// once it has no members.
func unpost(ctx context.Context, tx *framework.Txn, key string, old *schema.State) error {
	row := []byte(key)
	terms, err := schema.PostedTerms(ctx, tx, key, old)
	if err != nil {
		return err
	}
	for _, t := range terms {
		if err := tx.Delete(schema.TermsTable, []byte(t), framework.Column{Family: schema.PostingFamily, Qualifier: key}); err != nil {
			return err
		}
	}
	if len(terms) > 0 && !old.Legacy {
		if err := tx.Delete(schema.ClustersTable, row, schema.ClusterTerms); err != nil {
			return err
		}
	}
	if old.AnchorLen > 0 {
		anchors, err := postedAnchors(ctx, tx, key)
		if err != nil {
			return err
		}
		if _, err := postAnchors(tx, key, anchors, nil); err != nil {
			return err
		}
	}
	if old.Scored {
		d := schema.Corpus{Clusters: -1}
		if len(terms) > 0 {
			d.Docs, d.Words = -1, -old.Words
		}
		if err := schema.QueueCorpus(tx, "cluster/"+key, d); err != nil {
			return err
		}
	}
	if err := schema.DeleteListEntries(tx, key, old); err != nil {
		return err
	}
	return tx.Delete(schema.ClustersTable, row, schema.ClusterState)
}
