package query

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// Verify compares the index in db with want, a from-scratch computation of
// the pages that should be loaded: every page in want (and every URL in
// alsoAbsent, which must not be loaded), the given search queries and the
// whole top list. It returns one line per difference (at most max) and
// how many pages it checked. Run it when no notification is pending;
// before that the index legitimately lags.
func (ix *Engine) Verify(ctx context.Context, db *framework.DB, want *batch.Index, alsoAbsent, queries []string, max int) (checked int, diffs []string, err error) {
	add := func(format string, args ...any) bool {
		diffs = append(diffs, fmt.Sprintf(format, args...))
		return len(diffs) < max
	}
	for _, u := range want.URLs() {
		got, err := ix.Page(ctx, db, u)
		if err != nil {
			return checked, diffs, fmt.Errorf("verify: %s: %w", u, err)
		}
		checked++
		w, _ := want.Page(u)
		if d := comparePage(got, w); d != "" && !add("%s: %s", u, d) {
			return checked, diffs, nil
		}
	}
	for _, u := range alsoAbsent {
		if _, ok := want.Page(u); ok {
			continue
		}
		if got, err := ix.Page(ctx, db, u); err == nil && !add("%s is not loaded, but the index has %+v", u, got) {
			return checked, diffs, nil
		}
	}
	want = want.WithScoring(ix.opts.Scoring)
	for _, q := range queries {
		for _, offset := range []int{0, 3} {
			p, err := ix.SearchPage(ctx, db, SearchRequest{Query: q, Offset: offset, Limit: 10})
			if err != nil {
				return checked, diffs, err
			}
			wt, wres := want.SearchPage(q, offset, 10)
			if p.Total != wt || !sameResults(p.Results, wres) {
				if !add("search %q from %d = %d %v, want %d %v", q, offset, p.Total, p.Results, wt, wres) {
					return checked, diffs, nil
				}
			}
		}
	}
	top, err := ix.TopPage(ctx, db, 0, ix.opts.MaxResults)
	if err != nil {
		return checked, diffs, err
	}
	if wt, wtop := want.TopPage(0, ix.opts.MaxResults); top.Total != wt || !sameResults(top.Results, wtop) {
		if !add("top = %d %v, want %d %v", top.Total, top.Results, wt, wtop) {
			return checked, diffs, nil
		}
	}
	hosts := map[string]bool{}
	for _, u := range want.URLs() {
		hosts[schema.HostOf(u)] = true
	}
	for _, h := range slices.Sorted(maps.Keys(hosts)) {
		got, err := ix.SitePage(ctx, db, h, 1, ix.opts.MaxResults)
		if err != nil {
			return checked, diffs, err
		}
		if wt, w := want.Site(h, 1, ix.opts.MaxResults); got.Total != wt || !sameResults(got.Results, w) {
			if !add("site %s = %d %v, want %d %v", h, got.Total, got.Results, wt, w) {
				return checked, diffs, nil
			}
		}
	}
	o, err := ix.Overview(ctx, db)
	if err != nil {
		return checked, diffs, err
	}
	ws := want.Stats()
	if g := (batch.Stats{Pages: o.Pages, Links: o.Links, Clusters: o.Clusters, TextClusters: o.TextClusters, Words: o.Words}); g != ws {
		add("overview = %+v, want %+v", g, ws)
	}
	return checked, diffs, nil
}

// comparePage describes how got differs from want, or returns "".
func comparePage(got *PageView, want *batch.Page) string {
	var diffs []string
	check := func(name string, g, w any) {
		if g, w := fmt.Sprint(g), fmt.Sprint(w); g != w {
			diffs = append(diffs, fmt.Sprintf("%s = %s, want %s", name, g, w))
		}
	}
	check("title", got.Title, want.Title)
	check("text bytes", got.TextBytes, want.TextBytes)
	check("canonical", got.Canonical, want.Canonical)
	check("duplicates", got.Duplicates, cmpNil(want.Duplicates))
	check("rank", got.Rank, want.Rank)
	check("inbound count", got.InboundCount, want.InboundCount)
	in := make([]string, 0, len(got.Inlinks))
	for _, l := range got.Inlinks {
		in = append(in, fmt.Sprintf("%s -> %s %s %q", l.Source, l.Target, l.Anchor, l.Anchors))
	}
	win := make([]string, 0, len(want.Inlinks))
	for _, l := range want.Inlinks {
		win = append(win, fmt.Sprintf("%s -> %s %s %q", l.Source, l.Target, l.Anchor, cmpNil(l.Anchors)))
	}
	check("inlinks", in, win)
	out := make([]string, 0, len(got.Outlinks))
	for _, l := range got.Outlinks {
		out = append(out, fmt.Sprintf("%s %s %q", l.Target, l.Anchor, l.Anchors))
	}
	wout := make([]string, 0, len(want.Outlinks))
	for _, l := range want.Outlinks {
		wout = append(wout, fmt.Sprintf("%s %s %q", l.Target, l.Anchor, cmpNil(want.OutlinkAnchors[l.Target])))
	}
	check("outlinks", out, wout)
	return strings.Join(diffs, "; ")
}

func cmpNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sameResults(got []Result, want []batch.Result) bool {
	return slices.EqualFunc(got, want, func(g Result, w batch.Result) bool {
		return g.URL == w.URL && g.Title == w.Title && g.InboundCount == w.InboundCount && g.TextBytes == w.TextBytes && g.Score == w.Score
	})
}
