package webindex

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/batch"
)

// Verify compares the index in db with want, a from-scratch computation of
// the pages that should be loaded: every page in want (and every URL in
// alsoAbsent, which must not be loaded), the given search queries and the
// whole top list. It returns one line per difference (at most max) and
// how many pages it checked. Run it when no notification is pending;
// before that the index legitimately lags.
func (ix *Index) Verify(ctx context.Context, db *framework.DB, want *batch.Index, alsoAbsent, queries []string, max int) (checked int, diffs []string, err error) {
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
	for _, q := range queries {
		total, res, err := ix.Search(ctx, db, q, 10)
		if err != nil {
			return checked, diffs, err
		}
		wt, wres := want.Search(q, 10)
		if total != wt || !sameResults(res, wres) {
			if !add("search %q = %d %v, want %d %v", q, total, res, wt, wres) {
				return checked, diffs, nil
			}
		}
	}
	top, err := ix.Top(ctx, db, ix.opts.MaxResults)
	if err != nil {
		return checked, diffs, err
	}
	if wtop := want.Top(ix.opts.MaxResults); !sameResults(top, wtop) {
		add("top = %v, want %v", top, wtop)
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
		in = append(in, l.Source+" -> "+l.Target+" "+l.Anchor)
	}
	win := make([]string, 0, len(want.Inlinks))
	for _, l := range want.Inlinks {
		win = append(win, l.Source+" -> "+l.Target+" "+l.Anchor)
	}
	check("inlinks", in, win)
	out := make([]string, 0, len(got.Outlinks))
	for _, l := range got.Outlinks {
		out = append(out, l.Target+" "+l.Anchor)
	}
	wout := make([]string, 0, len(want.Outlinks))
	for _, l := range want.Outlinks {
		wout = append(wout, l.Target+" "+l.Anchor)
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
		return g.URL == w.URL && g.Title == w.Title && g.InboundCount == w.InboundCount && g.TextBytes == w.TextBytes
	})
}
