package webindex

import (
	"context"
	"errors"
	"fmt"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// observePage brings the index in line with a page's current document. It
// works on the difference between the document and the one it indexed last
// (stored beside it in the same transaction), so a re-run, or a run that
// collapses several loads, applies each change exactly once.
//
// It writes only cells keyed by this page (its own inlink cell on each
// target's row, its own member cell in a cluster), so pages indexed
// concurrently never conflict however popular their targets are. Everything
// derived from many pages is left to the weak observers it notifies.
func (ix *Index) observePage(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	url := string(row)
	if f, err := readFence(ctx, tx); err != nil {
		return err
	} else if f != nil && f.phase == phaseImporting {
		return deferPage(ctx, tx, f, url)
	}
	cur, err := schema.ReadDoc(ctx, tx, url, schema.Doc)
	if err != nil {
		return err
	}
	old, err := schema.ReadDoc(ctx, tx, url, schema.Indexed)
	if err != nil {
		return err
	}
	from, err := tx.Get(ctx, schema.PagesTable, row, schema.ClusterOf)
	if err != nil && !errors.Is(err, framework.ErrNotFound) {
		return err
	}
	if cur != nil && cur.URL != url {
		return fmt.Errorf("webindex: %s holds the document of %s", url, cur.URL)
	}
	if err := ix.keepRowTitle(ctx, tx, url, cur); err != nil {
		return err
	}

	before, after := schema.Anchors(old), schema.Anchors(cur)
	changed, anchorTerms, err := writeInlinks(tx, url, before, after)
	if err != nil {
		return err
	}
	if err := queueRelay(ctx, tx, url, changed); err != nil {
		return err
	}

	d := pageDelta(tx, old, cur, before, after)
	d.Anchors = anchorTerms
	if err := schema.QueueCorpus(tx, "page/"+url, d); err != nil {
		return err
	}

	if err := moveMember(tx, url, string(from), schema.ClusterKey(cur)); err != nil {
		return err
	}

	if ix.opts.PageRank != nil {
		if err := ix.indexPageRank(ctx, tx, url, cur, before, after, len(from) > 0); err != nil {
			return err
		}
	}

	if cur == nil {
		return tx.Delete(schema.PagesTable, row, schema.Indexed)
	}
	// The indexed copy keeps only what the next diff reads: the links.
	return tx.Set(schema.PagesTable, row, schema.Indexed, schema.EncodeDoc(&extract.Page{URL: url, Links: cur.Links, MoreAnchors: cur.MoreAnchors}))
}

// writeInlinks writes the page's inlink cell on the row of each target its
// links gained or re-anchored, deletes those of the targets it lost
// (before and after map the targets of the old and new document to their
// encoded anchors), and queues each target's change of inlink count and
// anchor terms. It returns the targets whose inlinks changed, for the
// relay, and the change of the number of the links' distinct anchor terms.
func writeInlinks(tx *framework.Txn, url string, before, after map[string]string) (changed []string, anchorTerms int64, err error) {
	inlink := framework.Column{Family: schema.InlinkFamily, Qualifier: url}
	for target := range before {
		if _, ok := after[target]; ok {
			continue
		}
		if err := tx.Delete(schema.PagesTable, []byte(target), inlink); err != nil {
			return nil, 0, err
		}
		n, err := queueInlinkDelta(tx, target, url, before[target], true, "", false)
		if err != nil {
			return nil, 0, err
		}
		anchorTerms += n
		changed = append(changed, target)
	}
	for target, anchor := range after {
		a, had := before[target]
		if had && a == anchor {
			continue
		}
		if err := tx.Set(schema.PagesTable, []byte(target), inlink, []byte(anchor)); err != nil {
			return nil, 0, err
		}
		n, err := queueInlinkDelta(tx, target, url, a, had, anchor, true)
		if err != nil {
			return nil, 0, err
		}
		anchorTerms += n
		changed = append(changed, target)
	}
	return changed, anchorTerms, nil
}

// moveMember moves the page from the cluster keyed from to the one keyed
// to (either empty: none), notifying both clusters to recompute.
func moveMember(tx *framework.Txn, url, from, to string) error {
	if from == to {
		return nil
	}
	var err error
	if to == "" {
		err = tx.Delete(schema.PagesTable, []byte(url), schema.ClusterOf)
	} else {
		err = tx.Set(schema.PagesTable, []byte(url), schema.ClusterOf, []byte(to))
	}
	if err != nil {
		return err
	}
	member := framework.Column{Family: schema.MemberFamily, Qualifier: url}
	if from != "" {
		if err := tx.Delete(schema.ClustersTable, []byte(from), member); err != nil {
			return err
		}
		if err := tx.NotifyWeak(schema.ClustersTable, []byte(from), schema.ClusterDirty); err != nil {
			return err
		}
	}
	if to != "" {
		if err := tx.Set(schema.ClustersTable, []byte(to), member, nil); err != nil {
			return err
		}
		if err := tx.NotifyWeak(schema.ClustersTable, []byte(to), schema.ClusterDirty); err != nil {
			return err
		}
	}
	return nil
}

// queueInlinkDelta records the change of target's inlink from source:
// its inlink cell's value goes from before (had: there was one) to after
// (has: there is one). The queued cell holds the change of target's inlink
// count (+1, -1 or 0) and of its anchor term counts; a re-anchored link
// whose terms stay the same changes nothing and queues nothing. It
// returns the change of the number of the link's distinct anchor terms.
func queueInlinkDelta(tx *framework.Txn, target, source, before string, had bool, after string, has bool) (int64, error) {
	terms, err := anchorTermDelta(before, had, after, has)
	if err != nil {
		return 0, fmt.Errorf("inlink of %s from %s: %w", target, source, err)
	}
	var count int64
	switch {
	case has && !had:
		count = 1
	case had && !has:
		count = -1
	case len(terms) == 0:
		return 0, nil
	}
	col := framework.Column{Family: schema.InlinkDeltaFamily, Qualifier: fmt.Sprintf("%016x/%s", tx.StartTs(), source)}
	return schema.AnchorSum(terms), tx.Set(schema.PagesTable, []byte(target), col, schema.EncodeInlinkDelta(count, terms))
}

// observeInlinks forwards the change of a URL's inlinks to its cluster,
// whose recompute counts them (and folds the queued deltas into the count
// once enough have piled up), as the relay does (relay.go). The relay
// notifies it for a URL that was not loaded: a URL that is not a loaded
// page has no cluster, and its deltas are folded here, so that the queue
// of a page never loaded does not grow without end. (Folding here for
// every URL counted each URL's inlinks twice per change, here and in the
// cluster's recompute; counting is the costliest read of both observers.)
// Stores written before the relay hold its notifications for every URL.
func (ix *Index) observeInlinks(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	key, err := tx.Get(ctx, schema.PagesTable, row, schema.ClusterOf)
	if errors.Is(err, framework.ErrNotFound) {
		_, _, err := schema.InlinkStats(ctx, tx, string(row), true, true)
		return err
	}
	if err != nil {
		return err
	}
	return tx.NotifyWeak(schema.ClustersTable, key, schema.ClusterDirty)
}

// pageDelta is the change of the corpus statistics when a page's indexed
// document goes from old to cur (nil: not loaded), whose links go from
// before to after.
func pageDelta(tx *framework.Txn, old, cur *extract.Page, before, after map[string]string) schema.Corpus {
	d := schema.Corpus{Links: int64(len(after) - len(before)), LastTs: tx.StartTs()}
	switch {
	case old == nil && cur != nil:
		d.Pages = 1
	case old != nil && cur == nil:
		d.Pages = -1
	}
	return d
}
