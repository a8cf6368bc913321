package schema

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/trickle-dev/trickle/framework"
)

// State is a cluster's derived state, kept in clusters/cluster:state. Every
// search hit reads it, so it holds only what a hit needs; the cluster's
// posted terms are in their own cell (ClusterTerms).
type State struct {
	Canonical string
	Inbound   int64
	// Rank is the canonical's rank by the Ranker, which search scores by.
	Rank int64
	// Words is the number of words of the cluster's text (BM25's length).
	Words int64
	// AnchorLen is the length of the cluster's anchor field: the sum of
	// its posted anchor term counts (ClusterAnchors).
	AnchorLen int64
	// Scored marks a state in the current encoding: its cluster's postings
	// hold term frequencies and are counted in the corpus statistics. An
	// older state's are not; recompute posts them again, and counts them,
	// the next time it runs.
	Scored bool
	// Legacy marks a state in the first encoding, which also held the
	// posted terms (legacyTerms).
	Legacy      bool
	legacyTerms []string
}

// State encodings: LegacyStateVersion held the terms as well;
// unscoredStateVersion had no rank and length; noAnchorsStateVersion no
// anchor length (its cluster has no anchor postings until recomputed).
const (
	LegacyStateVersion    = 1
	unscoredStateVersion  = 2
	noAnchorsStateVersion = 3
	stateVersion          = 4
)

func EncodeState(s *State) []byte {
	b := []byte{stateVersion}
	b = AppendString(b, s.Canonical)
	b = binary.AppendUvarint(b, uint64(s.Inbound))
	b = binary.AppendUvarint(b, uint64(s.Rank))
	b = binary.AppendUvarint(b, uint64(s.Words))
	return binary.AppendUvarint(b, uint64(s.AnchorLen))
}

func DecodeState(b []byte) (*State, error) {
	if len(b) == 0 || b[0] < LegacyStateVersion || b[0] > stateVersion {
		return nil, fmt.Errorf("%w: cluster state has unknown version", ErrCorrupt)
	}
	d := NewDecoder(b[1:])
	s := &State{Canonical: d.String(), Inbound: int64(d.Uvarint())}
	switch b[0] {
	case LegacyStateVersion:
		s.Legacy = true
		s.legacyTerms = d.Strings()
		s.Rank = s.Inbound
	case unscoredStateVersion:
		s.Rank = s.Inbound
	default:
		s.Scored = true
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

// EncodeTerms serializes a cluster's posted terms.
func EncodeTerms(terms []string) []byte {
	n := 1 + binary.MaxVarintLen64
	for _, t := range terms {
		n += binary.MaxVarintLen64 + len(t)
	}
	b := make([]byte, 0, n)
	b = append(b, termsVersion)
	b = binary.AppendUvarint(b, uint64(len(terms)))
	for _, t := range terms {
		b = AppendString(b, t)
	}
	return b
}

func decodeTerms(b []byte) ([]string, error) {
	if len(b) == 0 || b[0] != termsVersion {
		return nil, fmt.Errorf("%w: cluster terms have unknown version", ErrCorrupt)
	}
	d := NewDecoder(b[1:])
	terms := d.Strings()
	if d.Err() != nil || d.Len() != 0 {
		return nil, fmt.Errorf("%w: cluster terms of %d bytes are truncated or have trailing bytes", ErrCorrupt, len(b))
	}
	return terms, nil
}

// readState reads a cluster's state; nil if it has none.
func readState(ctx context.Context, tx *framework.Txn, key string) (*State, error) {
	b, err := tx.Get(ctx, ClustersTable, []byte(key), ClusterState)
	if errors.Is(err, framework.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s, err := DecodeState(b)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", key, err)
	}
	return s, nil
}

// PostedTerms returns the terms posted for the cluster key, whose state is
// s: from s itself if it is a legacy state, else from ClusterTerms.
func PostedTerms(ctx context.Context, tx *framework.Txn, key string, s *State) ([]string, error) {
	if s.Legacy {
		return s.legacyTerms, nil
	}
	b, err := tx.Get(ctx, ClustersTable, []byte(key), ClusterTerms)
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

// RowScan selects the cells of one row in one family.
func RowScan(table, row, family string) framework.ScanOptions {
	return framework.ScanOptions{Table: table, Start: []byte(row), End: append([]byte(row), 0), Families: []string{family}}
}

// ClusterRow is what a recompute reads of a cluster's own row.
type ClusterRow struct {
	State   *State           // nil if the cluster has none
	Anchors map[string]int64 // the anchor term counts posted; nil if none
	Members []string         // sorted
}

// ReadClusterRow reads a cluster's state, posted anchor terms and members
// with one scan of its row: on a store over the network that is one
// request where reading them one by one took three, and a cluster's
// recompute is the index's most frequent transaction. The row holds
// nothing else but the list of posted terms, which comes along.
func ReadClusterRow(ctx context.Context, tx *framework.Txn, key string) (*ClusterRow, error) {
	r := &ClusterRow{}
	o := framework.ScanOptions{Table: ClustersTable, Start: []byte(key), End: append([]byte(key), 0), Families: []string{ClusterState.Family, MemberFamily}}
	for e, err := range tx.Scan(ctx, o) {
		if err != nil {
			return nil, err
		}
		switch e.Column {
		case ClusterState:
			if r.State, err = DecodeState(e.Value); err != nil {
				return nil, fmt.Errorf("cluster %s: %w", key, err)
			}
		case ClusterAnchors:
			if r.Anchors, err = DecodeTermCounts(e.Value, map[string]int64{}); err != nil {
				return nil, fmt.Errorf("cluster %s anchors: %w", key, err)
			}
		default:
			if e.Column.Family == MemberFamily {
				r.Members = append(r.Members, e.Column.Qualifier)
			}
		}
	}
	return r, nil
}

// Members lists a cluster's pages, sorted.
func Members(ctx context.Context, tx *framework.Txn, key string) ([]string, error) {
	var out []string
	for e, err := range tx.Scan(ctx, RowScan(ClustersTable, key, MemberFamily)) {
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

// DecodeInlink reads the inlink cell e of target's row.
func DecodeInlink(target string, e framework.Entry) (Inlink, error) {
	as, err := DecodeAnchors(e.Value)
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

// Inlinks lists the links into url, sorted by source.
func Inlinks(ctx context.Context, tx *framework.Txn, url string) ([]Inlink, error) {
	var out []Inlink
	for e, err := range tx.Scan(ctx, RowScan(PagesTable, url, InlinkFamily)) {
		if err != nil {
			return nil, err
		}
		l, err := DecodeInlink(url, e)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// CellSetter writes a cell: a transaction, or a bulk load's setter.
type CellSetter interface {
	Set(table string, row []byte, col framework.Column, value []byte) error
}

// Setter adapts a bulk load's SetFunc to CellSetter.
type Setter SetFunc

func (s Setter) Set(table string, row []byte, col framework.Column, value []byte) error {
	return s(table, row, col, value)
}

// SetListEntries writes the top-list and site-list rows of cluster key
// with state s; DeleteListEntries removes them.
func SetListEntries(tx CellSetter, key string, s *State) error {
	if err := tx.Set(TopTable, TopRow(s.Inbound, s.Canonical, key), TopEntry, []byte(key)); err != nil {
		return err
	}
	return tx.Set(SitesTable, SiteRow(s.Inbound, s.Canonical, key), TopEntry, []byte(key))
}

func DeleteListEntries(tx *framework.Txn, key string, s *State) error {
	if err := tx.Delete(TopTable, TopRow(s.Inbound, s.Canonical, key), TopEntry); err != nil {
		return err
	}
	return tx.Delete(SitesTable, SiteRow(s.Inbound, s.Canonical, key), TopEntry)
}

// TopRow is a TopTable row key: rows sort by inbound count descending (the
// count is stored inverted, fixed width), then canonical URL, then cluster
// key, which keeps the rows of two clusters apart while a URL moves
// between them.
func TopRow(inbound int64, canonical, key string) []byte {
	b := binary.BigEndian.AppendUint64(nil, math.MaxUint64-uint64(inbound))
	b = append(b, canonical...)
	b = append(b, 0)
	return append(b, key...)
}

// ParseTopRow is the inverse of TopRow.
func ParseTopRow(row []byte) (inbound int64, canonical, key string, err error) {
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

// SetFunc receives the cells of a bulk-computed index.
type SetFunc func(table string, row []byte, col framework.Column, value []byte) error
