package ranking

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"

	"github.com/trickle-dev/trickle/framework"
)

// View is a cluster as the index defines it, computed from one snapshot.
type View struct {
	Members   []string
	Canonical string
	Ranks     map[string]int64
	// Inlinks are the links from outside the cluster into any member,
	// sorted by source then target; inbound counts their distinct sources.
	// inlinks is only filled in when asked for, or when the cluster has
	// several members (a lone page's inbound count is its inlink count).
	Inlinks []schema.Inlink
	Inbound int64
	// Anchors are the anchor term counts of the cluster (see the web index's anchors.go),
	// computed when the view folds (a recompute).
	Anchors map[string]int64
	// Cells are the members' cells a recompute read with their counts
	// (ViewOf), by member: nil for a view that did not fold.
	Cells map[string]map[framework.Column][]byte
}

// ComputeView derives a cluster's canonical and inbound count, and with
// withInlinks its inlinks, from its members' inlink counts and cells.
// With fold (in a read-write transaction) it folds the members' queued
// inlink deltas as it counts them (see CountInlinks).
func ComputeView(ctx context.Context, tx *framework.Txn, ranker Ranker, key string, withInlinks, fold bool) (*View, error) {
	ms, err := schema.Members(ctx, tx, key)
	if err != nil {
		return nil, err
	}
	return ViewOf(ctx, tx, ranker, ms, withInlinks, fold, fold)
}

// ViewOf is ComputeView of a cluster whose members ms were read already.
// With keepRows (and fold) it also reads the cells of the members' rows of
// the canonical table that updateRows keeps.
func ViewOf(ctx context.Context, tx *framework.Txn, ranker Ranker, ms []string, withInlinks, fold, keepRows bool) (*View, error) {
	if len(ms) == 0 {
		return &View{}, nil
	}
	v := &View{Members: ms, Ranks: make(map[string]int64, len(ms))}
	// The members' counts in one read, and for a recompute (fold) the
	// anchor terms it folds and the cells of the members' rows it keeps
	// (updateRows): one request for every member instead of two each.
	want := []framework.Column{schema.InlinkCountCol}
	if fold {
		want = append(want, schema.AnchorTermsCol)
		if keepRows {
			want = append(want, schema.RowCol, schema.SummaryCol)
		}
	}
	rows := make([][]byte, len(ms))
	for i, m := range ms {
		rows[i] = []byte(m)
	}
	cells, err := tx.GetRows(ctx, schema.PagesTable, rows, want)
	if err != nil {
		return nil, err
	}
	if fold {
		v.Cells = cells
	}
	var best int64
	for _, m := range ms {
		n, terms, err := schema.InlinkStatsOf(ctx, tx, m, cells[m], fold, false)
		if err != nil {
			return nil, err
		}
		if len(ms) == 1 {
			v.Anchors = terms
		}
		r, err := ranker.Rank(ctx, tx, m, n)
		if err != nil {
			return nil, fmt.Errorf("webindex: ranking %s: %w", m, err)
		}
		v.Ranks[m] = r
		if v.Canonical == "" || Better(r, m, best, v.Canonical) {
			best, v.Canonical = r, m
		}
		if len(ms) == 1 {
			v.Inbound = n
		}
		if !withInlinks && len(ms) == 1 {
			continue
		}
		in, err := schema.Inlinks(ctx, tx, m)
		if err != nil {
			return nil, err
		}
		for _, l := range in {
			if _, inside := slices.BinarySearch(ms, l.Source); !inside {
				v.Inlinks = append(v.Inlinks, l)
			}
		}
	}
	if len(ms) == 1 {
		return v, nil
	}
	slices.SortFunc(v.Inlinks, func(a, b schema.Inlink) int {
		if c := strings.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		return strings.Compare(a.Target, b.Target)
	})
	for i, l := range v.Inlinks {
		if i == 0 || l.Source != v.Inlinks[i-1].Source {
			v.Inbound++
		}
	}
	if fold {
		v.Anchors = outsideAnchors(v.Inlinks)
	}
	return v, nil
}

// Better reports whether url a with rank ra beats url b with rank rb as a
// canonical: higher rank, then shorter URL, then smaller URL.
func Better(ra int64, a string, rb int64, b string) bool {
	if ra != rb {
		return ra > rb
	}
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// outsideAnchors counts, for each term, the distinct sources among inlinks
// (a cluster's links from outside it, sorted by source) whose anchors
// hold the term: the anchor field of a cluster with several members,
// whose sources may link to more than one of them.
func outsideAnchors(inlinks []schema.Inlink) map[string]int64 {
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
