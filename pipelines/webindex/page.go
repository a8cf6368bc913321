package webindex

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// clusterKey is the ClustersTable row of the cluster p belongs to: its text
// hash, or for a page without text a cluster of its own keyed by its URL
// (textless pages are not duplicates of each other). "" for no page.
func clusterKey(p *extract.Page) string {
	switch {
	case p == nil:
		return ""
	case p.Text == "":
		return "url:" + p.URL
	}
	return "sha256:" + extract.TextHash(p.Text)
}

// readDoc reads and decodes an encoded document cell; nil if absent.
func readDoc(ctx context.Context, tx *framework.Txn, url string, col framework.Column) (*extract.Page, error) {
	b, err := tx.Get(ctx, PagesTable, []byte(url), col)
	if errors.Is(err, framework.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := decodeDoc(b)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", url, col, err)
	}
	return p, nil
}

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
	cur, err := readDoc(ctx, tx, url, Doc)
	if err != nil {
		return err
	}
	old, err := readDoc(ctx, tx, url, indexed)
	if err != nil {
		return err
	}
	from, err := tx.Get(ctx, PagesTable, row, clusterOf)
	if err != nil && !errors.Is(err, framework.ErrNotFound) {
		return err
	}
	if cur != nil && cur.URL != url {
		return fmt.Errorf("webindex: %s holds the document of %s", url, cur.URL)
	}
	if err := ix.keepRowTitle(ctx, tx, url, cur); err != nil {
		return err
	}

	before, after := anchors(old), anchors(cur)
	var anchorTerms int64 // the change of the anchor terms of the page's links
	var changed []string  // the targets whose inlinks change, for the relay
	inlink := framework.Column{Family: inlinkFamily, Qualifier: url}
	for target := range before {
		if _, ok := after[target]; ok {
			continue
		}
		if err := tx.Delete(PagesTable, []byte(target), inlink); err != nil {
			return err
		}
		n, err := queueInlinkDelta(tx, target, url, before[target], true, "", false)
		if err != nil {
			return err
		}
		anchorTerms += n
		changed = append(changed, target)
	}
	for target, anchor := range after {
		a, had := before[target]
		if had && a == anchor {
			continue
		}
		if err := tx.Set(PagesTable, []byte(target), inlink, []byte(anchor)); err != nil {
			return err
		}
		n, err := queueInlinkDelta(tx, target, url, a, had, anchor, true)
		if err != nil {
			return err
		}
		anchorTerms += n
		changed = append(changed, target)
	}
	if err := queueRelay(ctx, tx, url, changed); err != nil {
		return err
	}

	d := pageDelta(tx, old, cur, before, after)
	d.Anchors = anchorTerms
	if err := queueCorpus(tx, "page/"+url, d); err != nil {
		return err
	}

	member := framework.Column{Family: memberFamily, Qualifier: url}
	if from, to := string(from), clusterKey(cur); from != to {
		if to == "" {
			err = tx.Delete(PagesTable, row, clusterOf)
		} else {
			err = tx.Set(PagesTable, row, clusterOf, []byte(to))
		}
		if err != nil {
			return err
		}
		if from != "" {
			if err := tx.Delete(ClustersTable, []byte(from), member); err != nil {
				return err
			}
			if err := tx.NotifyWeak(ClustersTable, []byte(from), clusterDirty); err != nil {
				return err
			}
		}
		if to != "" {
			if err := tx.Set(ClustersTable, []byte(to), member, nil); err != nil {
				return err
			}
			if err := tx.NotifyWeak(ClustersTable, []byte(to), clusterDirty); err != nil {
				return err
			}
		}
	}

	if ix.opts.PageRank != nil {
		if err := ix.indexPageRank(ctx, tx, url, cur, before, after, len(from) > 0); err != nil {
			return err
		}
	}

	if cur == nil {
		return tx.Delete(PagesTable, row, indexed)
	}
	// The indexed copy keeps only what the next diff reads: the links.
	return tx.Set(PagesTable, row, indexed, encodeDoc(&extract.Page{URL: url, Links: cur.Links, MoreAnchors: cur.MoreAnchors}))
}

// anchors maps each outlink target of p to the value of its inlink cell:
// its anchors (encodeAnchors).
func anchors(p *extract.Page) map[string]string {
	if p == nil {
		return nil
	}
	all := anchorLists(p)
	m := make(map[string]string, len(all))
	for t, as := range all {
		m[t] = string(encodeAnchors(as))
	}
	return m
}

// anchorLists maps each outlink target of p to its anchors: the link's
// Anchor (if not empty), then its MoreAnchors.
func anchorLists(p *extract.Page) map[string][]string {
	m := make(map[string][]string, len(p.Links))
	for _, l := range p.Links {
		m[l.Target] = nil
		if l.Anchor != "" {
			m[l.Target] = []string{l.Anchor}
		}
	}
	for _, l := range p.MoreAnchors {
		if as, ok := m[l.Target]; ok && l.Anchor != "" {
			m[l.Target] = append(as, l.Anchor)
		}
	}
	return m
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
	col := framework.Column{Family: inlinkDeltaFamily, Qualifier: fmt.Sprintf("%016x/%s", tx.StartTs(), source)}
	return anchorSum(terms), tx.Set(PagesTable, []byte(target), col, encodeInlinkDelta(count, terms))
}

// foldAt is how many queued inlink deltas may pile up before a count that
// folds (see countInlinks) folds them into the count. Folding makes the
// transaction write two cells more per delta; reading a few queued deltas
// costs less than that.
const foldAt = 32

// countInlinks returns the number of url's inlinks in tx's snapshot: the
// folded count plus the deltas queued since (see inlinkStats).
func countInlinks(ctx context.Context, tx *framework.Txn, url string) (int64, error) {
	n, _, err := inlinkStats(ctx, tx, url, false, false)
	return n, err
}

// inlinkStats returns the number of url's inlinks in tx's snapshot and,
// with withTerms, its anchor term counts: the folded values plus the
// deltas queued since. With fold set it also folds the deltas into both
// once there are foldAt of them (a cluster's recompute does for its
// members, the inlinks observer for a URL that is not loaded; readers
// don't); fold reads the terms whatever withTerms says.
func inlinkStats(ctx context.Context, tx *framework.Txn, url string, fold, withTerms bool) (int64, map[string]int64, error) {
	row := []byte(url)
	withTerms = withTerms || fold
	// The count and the terms in one read (one request on a store over
	// the network).
	want := []framework.Column{inlinkCount}
	if withTerms {
		want = append(want, anchorTermsCol)
	}
	got, err := tx.GetRows(ctx, PagesTable, [][]byte{row}, want)
	if err != nil {
		return 0, nil, err
	}
	return inlinkStatsOf(ctx, tx, url, got[url], fold, withTerms)
}

// inlinkStatsOf is inlinkStats of url whose count and (with withTerms or
// fold) anchor terms cells were read already.
func inlinkStatsOf(ctx context.Context, tx *framework.Txn, url string, cells map[framework.Column][]byte, fold, withTerms bool) (int64, map[string]int64, error) {
	row := []byte(url)
	withTerms = withTerms || fold
	var err error
	var n int64
	if v, ok := cells[inlinkCount]; ok {
		if n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
			return 0, nil, fmt.Errorf("%w: inlink count of %s: %q", ErrCorrupt, url, v)
		}
	}
	var terms map[string]int64
	if withTerms {
		terms = map[string]int64{}
		if b, found := cells[anchorTermsCol]; found {
			if _, err := decodeTermCounts(b, terms); err != nil {
				return 0, nil, fmt.Errorf("anchor terms of %s: %w", url, err)
			}
		}
	}
	folded := n
	var queued []framework.Column
	for e, err := range tx.Scan(ctx, rowScan(PagesTable, url, inlinkDeltaFamily)) {
		if err != nil {
			return 0, nil, err
		}
		d, err := decodeInlinkDelta(e.Value, terms)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: inlink delta of %s: %q", ErrCorrupt, url, e.Value)
		}
		n += d
		queued = append(queued, e.Column)
	}
	if n < 0 {
		return 0, nil, fmt.Errorf("%w: %s has %d inlinks", ErrCorrupt, url, n)
	}
	for t, c := range terms {
		switch {
		case c < 0:
			return 0, nil, fmt.Errorf("%w: %s has %d sources of anchor term %q", ErrCorrupt, url, c, t)
		case c == 0:
			delete(terms, t)
		}
	}
	if !fold || len(queued) < foldAt {
		return n, terms, nil
	}
	for _, c := range queued {
		if err := tx.Delete(PagesTable, row, c); err != nil {
			return 0, nil, err
		}
	}
	if len(terms) == 0 {
		err = tx.Delete(PagesTable, row, anchorTermsCol)
	} else {
		err = tx.Set(PagesTable, row, anchorTermsCol, encodeTermCounts(terms))
	}
	if err != nil {
		return 0, nil, err
	}
	if n == folded {
		return n, terms, nil
	}
	if n == 0 {
		return 0, terms, tx.Delete(PagesTable, row, inlinkCount)
	}
	return n, terms, tx.Set(PagesTable, row, inlinkCount, strconv.AppendInt(nil, n, 10))
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
	key, err := tx.Get(ctx, PagesTable, row, clusterOf)
	if errors.Is(err, framework.ErrNotFound) {
		_, _, err := inlinkStats(ctx, tx, string(row), true, true)
		return err
	}
	if err != nil {
		return err
	}
	return tx.NotifyWeak(ClustersTable, key, clusterDirty)
}
