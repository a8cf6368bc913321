package schema

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// ClusterKey is the ClustersTable row of the cluster p belongs to: its text
// hash, or for a page without text a cluster of its own keyed by its URL
// (textless pages are not duplicates of each other). "" for no page.
func ClusterKey(p *extract.Page) string {
	switch {
	case p == nil:
		return ""
	case p.Text == "":
		return "url:" + p.URL
	}
	return "sha256:" + extract.TextHash(p.Text)
}

// ReadDoc reads and decodes an encoded document cell; nil if absent.
func ReadDoc(ctx context.Context, tx *framework.Txn, url string, col framework.Column) (*extract.Page, error) {
	b, err := tx.Get(ctx, PagesTable, []byte(url), col)
	if errors.Is(err, framework.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p, err := DecodeDoc(b)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", url, col, err)
	}
	return p, nil
}

// Anchors maps each outlink target of p to the value of its inlink cell:
// its anchors (EncodeAnchors).
func Anchors(p *extract.Page) map[string]string {
	if p == nil {
		return nil
	}
	all := AnchorLists(p)
	m := make(map[string]string, len(all))
	for t, as := range all {
		m[t] = string(EncodeAnchors(as))
	}
	return m
}

// AnchorLists maps each outlink target of p to its anchors: the link's
// Anchor (if not empty), then its MoreAnchors.
func AnchorLists(p *extract.Page) map[string][]string {
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

// FoldAt is how many queued inlink deltas may pile up before a count that
// folds (see CountInlinks) folds them into the count. Folding makes the
// transaction write two cells more per delta; reading a few queued deltas
// costs less than that.
const FoldAt = 32

// CountInlinks returns the number of url's inlinks in tx's snapshot: the
// folded count plus the deltas queued since (see InlinkStats).
func CountInlinks(ctx context.Context, tx *framework.Txn, url string) (int64, error) {
	n, _, err := InlinkStats(ctx, tx, url, false, false)
	return n, err
}

// InlinkStats returns the number of url's inlinks in tx's snapshot and,
// with withTerms, its anchor term counts: the folded values plus the
// deltas queued since. With fold set it also folds the deltas into both
// once there are FoldAt of them (a cluster's recompute does for its
// members, the inlinks observer for a URL that is not loaded; readers
// don't); fold reads the terms whatever withTerms says.
func InlinkStats(ctx context.Context, tx *framework.Txn, url string, fold, withTerms bool) (int64, map[string]int64, error) {
	row := []byte(url)
	withTerms = withTerms || fold
	// The count and the terms in one read (one request on a store over
	// the network).
	want := []framework.Column{InlinkCountCol}
	if withTerms {
		want = append(want, AnchorTermsCol)
	}
	got, err := tx.GetRows(ctx, PagesTable, [][]byte{row}, want)
	if err != nil {
		return 0, nil, err
	}
	return InlinkStatsOf(ctx, tx, url, got[url], fold, withTerms)
}

// InlinkStatsOf is InlinkStats of url whose count and (with withTerms or
// fold) anchor terms cells were read already.
func InlinkStatsOf(ctx context.Context, tx *framework.Txn, url string, cells map[framework.Column][]byte, fold, withTerms bool) (int64, map[string]int64, error) {
	row := []byte(url)
	withTerms = withTerms || fold
	var err error
	var n int64
	if v, ok := cells[InlinkCountCol]; ok {
		if n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
			return 0, nil, fmt.Errorf("%w: inlink count of %s: %q", ErrCorrupt, url, v)
		}
	}
	var terms map[string]int64
	if withTerms {
		terms = map[string]int64{}
		if b, found := cells[AnchorTermsCol]; found {
			if _, err := DecodeTermCounts(b, terms); err != nil {
				return 0, nil, fmt.Errorf("anchor terms of %s: %w", url, err)
			}
		}
	}
	folded := n
	var queued []framework.Column
	for e, err := range tx.Scan(ctx, RowScan(PagesTable, url, InlinkDeltaFamily)) {
		if err != nil {
			return 0, nil, err
		}
		d, err := DecodeInlinkDelta(e.Value, terms)
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
	if !fold || len(queued) < FoldAt {
		return n, terms, nil
	}
	for _, c := range queued {
		if err := tx.Delete(PagesTable, row, c); err != nil {
			return 0, nil, err
		}
	}
	if len(terms) == 0 {
		err = tx.Delete(PagesTable, row, AnchorTermsCol)
	} else {
		err = tx.Set(PagesTable, row, AnchorTermsCol, EncodeTermCounts(terms))
	}
	if err != nil {
		return 0, nil, err
	}
	if n == folded {
		return n, terms, nil
	}
	if n == 0 {
		return 0, terms, tx.Delete(PagesTable, row, InlinkCountCol)
	}
	return n, terms, tx.Set(PagesTable, row, InlinkCountCol, strconv.AppendInt(nil, n, 10))
}
