package webindex

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/trickle-dev/trickle/framework"
)

// state is a cluster's derived state, kept in clusters/cluster:state. Every
// search hit reads it, so it holds only what a hit needs; the cluster's
// posted terms are in their own cell (clusterTerms).
type state struct {
	Canonical string
	Inbound   int64
	// Rank is the canonical's rank by the Ranker, which search scores by.
	Rank int64
	// Words is the number of words of the cluster's text (BM25's length).
	Words int64
	// AnchorLen is the length of the cluster's anchor field: the sum of
	// its posted anchor term counts (clusterAnchors).
	AnchorLen int64
	// scored marks a state in the current encoding: its cluster's postings
	// hold term frequencies and are counted in the corpus statistics. An
	// older state's are not; recompute posts them again, and counts them,
	// the next time it runs.
	scored bool
	// legacy marks a state in the first encoding, which also held the
	// posted terms (legacyTerms).
	legacy      bool
	legacyTerms []string
}

// State encodings: legacyStateVersion held the terms as well;
// unscoredStateVersion had no rank and length; noAnchorsStateVersion no
// anchor length (its cluster has no anchor postings until recomputed).
const (
	legacyStateVersion    = 1
	unscoredStateVersion  = 2
	noAnchorsStateVersion = 3
	stateVersion          = 4
)

func encodeState(s *state) []byte {
	b := []byte{stateVersion}
	b = appendString(b, s.Canonical)
	b = binary.AppendUvarint(b, uint64(s.Inbound))
	b = binary.AppendUvarint(b, uint64(s.Rank))
	b = binary.AppendUvarint(b, uint64(s.Words))
	return binary.AppendUvarint(b, uint64(s.AnchorLen))
}

func decodeState(b []byte) (*state, error) {
	if len(b) == 0 || b[0] < legacyStateVersion || b[0] > stateVersion {
		return nil, fmt.Errorf("%w: cluster state has unknown version", ErrCorrupt)
	}
	d := newDecoder(b[1:])
	s := &state{Canonical: d.String(), Inbound: int64(d.Uvarint())}
	switch b[0] {
	case legacyStateVersion:
		s.legacy = true
		s.legacyTerms = d.strings()
		s.Rank = s.Inbound
	case unscoredStateVersion:
		s.Rank = s.Inbound
	default:
		s.scored = true
		s.Rank, s.Words = int64(d.Uvarint()), int64(d.Uvarint())
		if b[0] == stateVersion {
			s.AnchorLen = int64(d.Uvarint())
		}
	}
	if d.Err() != nil || d.Len() != 0 || s.Inbound < 0 || s.Rank < 0 || s.Words < 0 || s.AnchorLen < 0 {
		return nil, fmt.Errorf("%w: cluster state of %d bytes is truncated or has trailing bytes", ErrCorrupt, len(b))
	}
	return s, nil
}

const termsVersion = 1

// encodeTerms serializes a cluster's posted terms.
func encodeTerms(terms []string) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, t := range terms {
		n += binary.MaxVarintLen64 + len(t)
	}
	b := make([]byte, 0, n)
	b = append(b, termsVersion)
	b = binary.AppendUvarint(b, uint64(len(terms)))
	for _, t := range terms {
		b = appendString(b, t)
	}
	return b
}

func decodeTerms(b []byte) ([]string, error) {
	if len(b) == 0 || b[0] != termsVersion {
		return nil, fmt.Errorf("%w: cluster terms have unknown version", ErrCorrupt)
	}
	d := newDecoder(b[1:])
	terms := d.strings()
	if d.Err() != nil || d.Len() != 0 {
		return nil, fmt.Errorf("%w: cluster terms of %d bytes are truncated or have trailing bytes", ErrCorrupt, len(b))
	}
	return terms, nil
}

// readState reads a cluster's state; nil if it has none.
func readState(ctx context.Context, tx *framework.Txn, key string) (*state, error) {
	b, err := tx.Get(ctx, ClustersTable, []byte(key), clusterState)
	if errors.Is(err, framework.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := decodeState(b)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", key, err)
	}
	return s, nil
}

// postedTerms returns the terms posted for the cluster key, whose state is
// s: from s itself if it is a legacy state, else from clusterTerms.
func postedTerms(ctx context.Context, tx *framework.Txn, key string, s *state) ([]string, error) {
	if s.legacy {
		return s.legacyTerms, nil
	}
	b, err := tx.Get(ctx, ClustersTable, []byte(key), clusterTerms)
	if errors.Is(err, framework.ErrNotFound) {
		return nil, nil // a cluster without text posts no terms
	}
	if err != nil {
		return nil, err
	}
	terms, err := decodeTerms(b)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", key, err)
	}
	return terms, nil
}

// rowScan selects the cells of one row in one family.
func rowScan(table, row, family string) framework.ScanOptions {
	return framework.ScanOptions{Table: table, Start: []byte(row), End: append([]byte(row), 0), Families: []string{family}}
}

// clusterRow is what a recompute reads of a cluster's own row.
type clusterRow struct {
	state   *state           // nil if the cluster has none
	anchors map[string]int64 // the anchor term counts posted; nil if none
	members []string         // sorted
}

// readClusterRow reads a cluster's state, posted anchor terms and members
// with one scan of its row: on a store over the network that is one
// request where reading them one by one took three, and a cluster's
// recompute is the index's most frequent transaction. The row holds
// nothing else but the list of posted terms, which comes along.
func readClusterRow(ctx context.Context, tx *framework.Txn, key string) (*clusterRow, error) {
	r := &clusterRow{}
	o := framework.ScanOptions{Table: ClustersTable, Start: []byte(key), End: append([]byte(key), 0), Families: []string{clusterState.Family, memberFamily}}
	for e, err := range tx.Scan(ctx, o) {
		if err != nil {
			return nil, err
		}
		switch e.Column {
		case clusterState:
			if r.state, err = decodeState(e.Value); err != nil {
				return nil, fmt.Errorf("cluster %s: %w", key, err)
			}
		case clusterAnchors:
			if r.anchors, err = decodeTermCounts(e.Value, map[string]int64{}); err != nil {
				return nil, fmt.Errorf("cluster %s anchors: %w", key, err)
			}
		default:
			if e.Column.Family == memberFamily {
				r.members = append(r.members, e.Column.Qualifier)
			}
		}
	}
	return r, nil
}

// members lists a cluster's pages, sorted.
func members(ctx context.Context, tx *framework.Txn, key string) ([]string, error) {
	var out []string
	for e, err := range tx.Scan(ctx, rowScan(ClustersTable, key, memberFamily)) {
		if err != nil {
			return nil, err
		}
		out = append(out, e.Column.Qualifier)
	}
	return out, nil
}

// Inlink is one link into a cluster: Source links to Target with Anchor
// (its first non-empty anchor text) and Anchors (all of them, in the
// order of Source's document; empty when the link has no text).
type Inlink struct {
	Source  string   `json:"source"`
	Target  string   `json:"target"`
	Anchor  string   `json:"anchor"`
	Anchors []string `json:"anchors"`
}

// decodeInlink reads the inlink cell e of target's row.
func decodeInlink(target string, e framework.Entry) (Inlink, error) {
	as, err := decodeAnchors(e.Value)
	if err != nil {
		return Inlink{}, fmt.Errorf("inlink of %s from %s: %w", target, e.Column.Qualifier, err)
	}
	l := Inlink{Source: e.Column.Qualifier, Target: target, Anchors: as}
	if len(as) > 0 {
		l.Anchor = as[0]
	} else {
		l.Anchors = []string{}
	}
	return l, nil
}

// inlinks lists the links into url, sorted by source.
func inlinks(ctx context.Context, tx *framework.Txn, url string) ([]Inlink, error) {
	var out []Inlink
	for e, err := range tx.Scan(ctx, rowScan(PagesTable, url, inlinkFamily)) {
		if err != nil {
			return nil, err
		}
		l, err := decodeInlink(url, e)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// view is a cluster as the index defines it, computed from one snapshot.
type view struct {
	members   []string
	canonical string
	ranks     map[string]int64
	// inlinks are the links from outside the cluster into any member,
	// sorted by source then target; inbound counts their distinct sources.
	// inlinks is only filled in when asked for, or when the cluster has
	// several members (a lone page's inbound count is its inlink count).
	inlinks []Inlink
	inbound int64
	// anchors are the anchor term counts of the cluster (see anchors.go),
	// computed when the view folds (a recompute).
	anchors map[string]int64
	// cells are the members' cells a recompute read with their counts
	// (viewOf), by member: nil for a view that did not fold.
	cells map[string]map[framework.Column][]byte
}

// computeView derives a cluster's canonical and inbound count, and with
// withInlinks its inlinks, from its members' inlink counts and cells.
// With fold (in a read-write transaction) it folds the members' queued
// inlink deltas as it counts them (see countInlinks).
func computeView(ctx context.Context, tx *framework.Txn, ranker Ranker, key string, withInlinks, fold bool) (*view, error) {
	ms, err := members(ctx, tx, key)
	if err != nil {
		return nil, err
	}
	return viewOf(ctx, tx, ranker, ms, withInlinks, fold, fold)
}

// viewOf is computeView of a cluster whose members ms were read already.
// With keepRows (and fold) it also reads the cells of the members' rows of
// the canonical table that updateRows keeps.
func viewOf(ctx context.Context, tx *framework.Txn, ranker Ranker, ms []string, withInlinks, fold, keepRows bool) (*view, error) {
	if len(ms) == 0 {
		return &view{}, nil
	}
	v := &view{members: ms, ranks: make(map[string]int64, len(ms))}
	// The members' counts in one read, and for a recompute (fold) the
	// anchor terms it folds and the cells of the members' rows it keeps
	// (updateRows): one request for every member instead of two each.
	want := []framework.Column{inlinkCount}
	if fold {
		want = append(want, anchorTermsCol)
		if keepRows {
			want = append(want, rowCol, summaryCol)
		}
	}
	rows := make([][]byte, len(ms))
	for i, m := range ms {
		rows[i] = []byte(m)
	}
	cells, err := tx.GetRows(ctx, PagesTable, rows, want)
	if err != nil {
		return nil, err
	}
	if fold {
		v.cells = cells
	}
	var best int64
	for _, m := range ms {
		n, terms, err := inlinkStatsOf(ctx, tx, m, cells[m], fold, false)
		if err != nil {
			return nil, err
		}
		if len(ms) == 1 {
			v.anchors = terms
		}
		r, err := ranker.Rank(ctx, tx, m, n)
		if err != nil {
			return nil, fmt.Errorf("webindex: ranking %s: %w", m, err)
		}
		v.ranks[m] = r
		if v.canonical == "" || better(r, m, best, v.canonical) {
			best, v.canonical = r, m
		}
		if len(ms) == 1 {
			v.inbound = n
		}
		if !withInlinks && len(ms) == 1 {
			continue
		}
		in, err := inlinks(ctx, tx, m)
		if err != nil {
			return nil, err
		}
		for _, l := range in {
			if _, inside := slices.BinarySearch(ms, l.Source); !inside {
				v.inlinks = append(v.inlinks, l)
			}
		}
	}
	if len(ms) == 1 {
		return v, nil
	}
	slices.SortFunc(v.inlinks, func(a, b Inlink) int {
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		return strings.Compare(a.Target, b.Target)
	})
	for i, l := range v.inlinks {
		if i == 0 || l.Source != v.inlinks[i-1].Source {
			v.inbound++
		}
	}
	if fold {
		v.anchors = outsideAnchors(v.inlinks)
	}
	return v, nil
}

// better reports whether url a with rank ra beats url b with rank rb as a
// canonical: higher rank, then shorter URL, then smaller URL.
func better(ra int64, a string, rb int64, b string) bool {
	if ra != rb {
		return ra > rb
	}
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

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
	cr, err := readClusterRow(ctx, tx, key)
	if err != nil {
		return err
	}
	old := cr.state
	v, err := viewOf(ctx, tx, ix.opts.Ranker, cr.members, false, true, !ix.knobs.noRows)
	if err != nil {
		return err
	}
	if len(v.members) == 0 {
		if old == nil {
			return nil
		}
		return unpost(ctx, tx, key, old)
	}

	next := &state{Canonical: v.canonical, Inbound: v.inbound, Rank: v.ranks[v.canonical], scored: true}
	var counts map[string]int64 // the text's terms, when (re)posting them
	if old == nil || !old.scored {
		// A new cluster, or one posted before postings held frequencies:
		// post its terms, taken from the text of a member whose loaded
		// document still has the cluster's text. If none has, every
		// member changed since it was indexed, and each one's page
		// observer, still to run, will notify the cluster again.
		found := false
		for _, m := range v.members {
			doc, err := readDoc(ctx, tx, m, Doc)
			if err != nil {
				return err
			}
			if doc != nil && clusterKey(doc) == key {
				counts, next.Words = termCounts(doc.Text)
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
		anchors = postable(v.anchors)
	}
	if old != nil && old.AnchorLen > 0 {
		oldAnchors = cr.anchors
	}
	next.AnchorLen = anchorSum(anchors)
	if counts == nil && old.Canonical == next.Canonical && old.Inbound == next.Inbound && old.Rank == next.Rank &&
		old.AnchorLen == next.AnchorLen && maps.Equal(oldAnchors, anchors) {
		return nil
	}
	var d corpus // the change of the corpus statistics
	if counts != nil {
		if d, err = post(tx, key, counts, next.Words); err != nil {
			return err
		}
	}
	if _, err := postAnchors(tx, key, oldAnchors, anchors); err != nil {
		return err
	}
	if d != (corpus{}) {
		if err := queueCorpus(tx, "cluster/"+key, d); err != nil {
			return err
		}
	}
	if old != nil {
		if err := deleteListEntries(tx, key, old); err != nil {
			return err
		}
	}
	if err := setListEntries(tx, key, next); err != nil {
		return err
	}
	return tx.Set(ClustersTable, row, clusterState, encodeState(next))
}

// postedAnchors reads the anchor term counts posted for the cluster key.
func postedAnchors(ctx context.Context, tx *framework.Txn, key string) (map[string]int64, error) {
	b, found, err := tx.Lookup(ctx, ClustersTable, []byte(key), clusterAnchors)
	if err != nil || !found {
		return nil, err
	}
	m, err := decodeTermCounts(b, map[string]int64{})
	if err != nil {
		return nil, fmt.Errorf("cluster %s anchors: %w", key, err)
	}
	return m, nil
}

// post writes the postings of the cluster key (term frequencies counts,
// words words) and its term list, and returns the change of the corpus
// statistics that comes with a new cluster.
func post(tx *framework.Txn, key string, counts map[string]int64, words int64) (corpus, error) {
	terms := sortedTerms(counts)
	for _, t := range terms {
		if err := tx.Set(TermsTable, []byte(t), framework.Column{Family: postingFamily, Qualifier: key}, encodePosting(counts[t])); err != nil {
			return corpus{}, err
		}
	}
	d := corpus{Clusters: 1}
	if len(terms) > 0 {
		if err := tx.Set(ClustersTable, []byte(key), clusterTerms, encodeTerms(terms)); err != nil {
			return corpus{}, err
		}
		d.Docs, d.Words = 1, words
	}
	return d, nil
}

// unpost removes the cluster key, whose last state is old, from the index
// once it has no members.
func unpost(ctx context.Context, tx *framework.Txn, key string, old *state) error {
	row := []byte(key)
	terms, err := postedTerms(ctx, tx, key, old)
	if err != nil {
		return err
	}
	for _, t := range terms {
		if err := tx.Delete(TermsTable, []byte(t), framework.Column{Family: postingFamily, Qualifier: key}); err != nil {
			return err
		}
	}
	if len(terms) > 0 && !old.legacy {
		if err := tx.Delete(ClustersTable, row, clusterTerms); err != nil {
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
	if old.scored {
		d := corpus{Clusters: -1}
		if len(terms) > 0 {
			d.Docs, d.Words = -1, -old.Words
		}
		if err := queueCorpus(tx, "cluster/"+key, d); err != nil {
			return err
		}
	}
	if err := deleteListEntries(tx, key, old); err != nil {
		return err
	}
	return tx.Delete(ClustersTable, row, clusterState)
}

// cellSetter writes a cell: a transaction, or a bulk load's setter.
type cellSetter interface {
	Set(table string, row []byte, col framework.Column, value []byte) error
}

// setter adapts a bulk load's setFunc to cellSetter.
type setter setFunc

func (s setter) Set(table string, row []byte, col framework.Column, value []byte) error {
	return s(table, row, col, value)
}

// setListEntries writes the top-list and site-list rows of cluster key
// with state s; deleteListEntries removes them.
func setListEntries(tx cellSetter, key string, s *state) error {
	if err := tx.Set(TopTable, topRow(s.Inbound, s.Canonical, key), topEntry, []byte(key)); err != nil {
		return err
	}
	return tx.Set(SitesTable, siteRow(s.Inbound, s.Canonical, key), topEntry, []byte(key))
}

func deleteListEntries(tx *framework.Txn, key string, s *state) error {
	if err := tx.Delete(TopTable, topRow(s.Inbound, s.Canonical, key), topEntry); err != nil {
		return err
	}
	return tx.Delete(SitesTable, siteRow(s.Inbound, s.Canonical, key), topEntry)
}

// topRow is a TopTable row key: rows sort by inbound count descending (the
// count is stored inverted, fixed width), then canonical URL, then cluster
// key, which keeps the rows of two clusters apart while a URL moves
// between them.
func topRow(inbound int64, canonical, key string) []byte {
	b := binary.BigEndian.AppendUint64(nil, math.MaxUint64-uint64(inbound))
	b = append(b, canonical...)
	b = append(b, 0)
	return append(b, key...)
}

// parseTopRow is the inverse of topRow.
func parseTopRow(row []byte) (inbound int64, canonical, key string, err error) {
	if len(row) < 8 {
		return 0, "", "", fmt.Errorf("%w: top row %q", ErrCorrupt, row)
	}
	rest := row[8:]
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		return 0, "", "", fmt.Errorf("%w: top row %q", ErrCorrupt, row)
	}
	return int64(math.MaxUint64 - binary.BigEndian.Uint64(row[:8])), string(rest[:i]), string(rest[i+1:]), nil
}
