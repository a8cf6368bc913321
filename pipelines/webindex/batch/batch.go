// Package batch computes the whole web index from scratch, in memory, from
// the set of currently loaded pages.
//
// It exists to be the reference the incremental pipeline (package webindex)
// is checked against: after any sequence of page loads and deletes, every
// answer the incremental index gives must equal what Compute derives from
// the pages loaded at that moment. It is therefore written directly from the
// semantics, in the plainest way available, with no caching, sharing or
// cleverness: a few passes over the pages and their links.
//
// # Semantics
//
// Parsing, normalization and term extraction are package extract's. Given
// the loaded pages (keyed by normalized URL):
//   - Pages with identical non-empty Text form a duplicate cluster; a page
//     with empty Text is alone in its own cluster.
//   - The rank of a URL is the number of distinct loaded pages other than
//     itself that link to it (see Ranker, which can replace this).
//   - A cluster's canonical has the highest rank; ties go to the shortest
//     URL (in bytes), then the lexicographically smallest.
//   - The inlinks of a canonical are all links (source, target, anchor) whose
//     target is in its cluster and whose source is a loaded page outside it;
//     its inbound count is the number of distinct sources among them. A
//     non-canonical page reports its canonical's inlinks and inbound count
//     but its own rank, title and outlinks.
//   - Search matches canonicals with text whose text or anchor text (the
//     anchors of their inlinks) holds every word of the query
//     (extract.ParseQuery); a query without words matches nothing.
//     Results are ordered by score (see Scoring) descending, then inbound
//     count descending, then URL ascending; the top list by inbound count
//     descending, then URL ascending, and a site's list (the canonicals
//     whose URL's host is the site) likewise.
//   - A result (of a search or the top list) carries the canonical's title
//     cut to its longest prefix of at most ResultTitleBytes bytes that does
//     not split a UTF-8 sequence, and the length of its text in bytes.
package batch

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"
)

// Inlink is one link into a cluster: Source links to Target (a member of
// the cluster) with anchor texts Anchors (every distinct non-empty text of
// Source's <a> to Target, in document order), the first of which is
// Anchor.
type Inlink struct {
	Source  string
	Target  string
	Anchor  string
	Anchors []string
}

// Page is everything the index reports about one loaded page.
type Page struct {
	// URL is the page's normalized URL.
	URL string
	// Title is the page's own title.
	Title string
	// TextBytes is the length of the page's text in bytes.
	TextBytes int64
	// Canonical is the URL representing the page's duplicate cluster (the
	// page itself when it is canonical).
	Canonical string
	// Duplicates are the other members of the page's cluster, sorted.
	Duplicates []string
	// Rank is the page's own rank, as computed by the Ranker.
	Rank int64
	// InboundCount is the number of distinct sources of Inlinks.
	InboundCount int64
	// Inlinks are the canonical's inlinks, sorted by source, then target.
	Inlinks []Inlink
	// Outlinks are the page's own links, as extracted; OutlinkAnchors
	// maps each target to all its anchor texts, as Inlink.Anchors.
	Outlinks       []extract.Link
	OutlinkAnchors map[string][]string
}

// ResultTitleBytes bounds the title of a Result.
const ResultTitleBytes = 256

// Result is one entry of a search result or a top list: a canonical page.
type Result struct {
	URL string
	// Title is the page's title, cut to at most ResultTitleBytes bytes.
	Title        string
	InboundCount int64
	// TextBytes is the length of the page's text in bytes.
	TextBytes int64
	// Score is a search result's score; 0 in the top list.
	Score float64
}

// Index is the fully computed web index over one set of loaded pages. It is
// immutable and safe for concurrent use.
type Index struct {
	pages map[string]*Page
	// canonicals holds every canonical, ordered for Top and Search.
	canonicals []*Page
	// text holds what scoring needs of each canonical.
	text map[string]*textStats
	// links is the number of distinct links out of the loaded pages,
	// anchorTerms the sum of the numbers of distinct terms of their
	// anchors (what the mean anchor field length is taken from).
	links, anchorTerms int64
	scorer             Scoring
}

// Compute builds the index of pages with the default ranker, InlinkCount.
// The map is keyed by normalized URL, as extract.Parse returns them; keys
// are taken to be the pages' URLs. Compute does not modify pages.
func Compute(pages map[string]*extract.Page) *Index {
	return ComputeWith(pages, InlinkCount{})
}

// ComputeWith builds the index of pages, choosing canonicals with r.
func ComputeWith(pages map[string]*extract.Page, r Ranker) *Index {
	ranks := r.Rank(pages)

	// Clusters: group URLs by text; an empty text is its own cluster.
	clusterOf := map[string]string{} // URL -> cluster key
	clusters := map[string][]string{}
	for u, p := range pages {
		key := "text:" + p.Text
		if p.Text == "" {
			key = "url:" + u
		}
		clusterOf[u] = key
		clusters[key] = append(clusters[key], u)
	}

	// Inlinks: every link whose target is loaded and in another cluster
	// than its source belongs to the target's cluster.
	inlinks := map[string][]Inlink{}
	for src, p := range pages {
		for _, l := range p.Links {
			key, loaded := clusterOf[l.Target]
			if loaded && key != clusterOf[src] {
				inlinks[key] = append(inlinks[key], Inlink{Source: src, Target: l.Target, Anchor: l.Anchor, Anchors: anchorsOf(p, l.Target)})
			}
		}
	}

	ix := &Index{pages: map[string]*Page{}, text: map[string]*textStats{}, scorer: DefaultScoring()}
	for _, p := range pages {
		ix.links += int64(len(p.Links))
		for _, l := range p.Links {
			ix.anchorTerms += int64(len(extract.Terms(strings.Join(anchorsOf(p, l.Target), "\n"))))
		}
	}
	for key, members := range clusters {
		slices.Sort(members)
		canon := members[0]
		for _, m := range members[1:] {
			if better(ranks[m], m, ranks[canon], canon) {
				canon = m
			}
		}
		links := inlinks[key]
		slices.SortFunc(links, func(a, b Inlink) int {
			if c := cmp.Compare(a.Source, b.Source); c != 0 {
				return c
			}
			return cmp.Compare(a.Target, b.Target)
		})
		sources := map[string]bool{}
		for _, l := range links {
			sources[l.Source] = true
		}
		for _, m := range members {
			p := pages[m]
			ix.pages[m] = &Page{
				URL:          m,
				Title:        p.Title,
				TextBytes:    int64(len(p.Text)),
				Canonical:    canon,
				Duplicates:   others(members, m),
				Rank:         ranks[m],
				InboundCount: int64(len(sources)),
				Inlinks:      slices.Clone(links),
				Outlinks:     slices.Clone(p.Links),
			}
			ix.pages[m].OutlinkAnchors = map[string][]string{}
			for _, l := range p.Links {
				ix.pages[m].OutlinkAnchors[l.Target] = anchorsOf(p, l.Target)
			}
		}
		ix.text[canon] = countWords(pages[canon].Text)
		ix.text[canon].rank = ranks[canon]
		if len(ix.text[canon].counts) > 0 {
			ix.text[canon].anchors = anchorCounts(links)
		}
		ix.canonicals = append(ix.canonicals, ix.pages[canon])
	}
	slices.SortFunc(ix.canonicals, func(a, b *Page) int {
		if c := cmp.Compare(b.InboundCount, a.InboundCount); c != 0 {
			return c
		}
		return cmp.Compare(a.URL, b.URL)
	})
	return ix
}

// better reports whether URL a with rank ra beats URL b with rank rb as a
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

// anchorsOf returns the texts of p's links to target: the link's Anchor,
// then the texts MoreAnchors adds, skipping empty ones.
func anchorsOf(p *extract.Page, target string) []string {
	var out []string
	for _, l := range p.Links {
		if l.Target == target && l.Anchor != "" {
			out = append(out, l.Anchor)
		}
	}
	for _, l := range p.MoreAnchors {
		if l.Target == target && l.Anchor != "" {
			out = append(out, l.Anchor)
		}
	}
	return out
}

// others returns the sorted members other than self, or nil if none.
func others(sortedMembers []string, self string) []string {
	var out []string
	for _, m := range sortedMembers {
		if m != self {
			out = append(out, m)
		}
	}
	return out
}

// Len returns the number of loaded pages.
func (ix *Index) Len() int { return len(ix.pages) }

// URLs returns the URLs of all loaded pages, sorted.
func (ix *Index) URLs() []string {
	urls := make([]string, 0, len(ix.pages))
	for u := range ix.pages {
		urls = append(urls, u)
	}
	slices.Sort(urls)
	return urls
}

// Page returns what the index reports about the loaded page with normalized
// URL url, or false if no such page is loaded. The result must not be
// modified.
func (ix *Index) Page(url string) (*Page, bool) {
	p, ok := ix.pages[url]
	return p, ok
}

// Search returns the first limit results of query (none if limit <= 0);
// see SearchPage.
func (ix *Index) Search(query string, limit int) (total int, results []Result) {
	return ix.SearchPage(query, 0, limit)
}

// SearchPage returns the canonicals with text holding every word of query
// (extract.ParseQuery) in their text or anchor text, ordered by score
// (see Scoring) descending, then inbound count descending, then URL
// ascending: total is the number of matches and results at most limit of
// them from offset on. A query without words matches nothing.
func (ix *Index) SearchPage(query string, offset, limit int) (total int, results []Result) {
	q := scoring.NewQuery(extract.ParseQuery(query))
	if len(q.Words) == 0 {
		return 0, nil
	}
	corpus := ix.corpusStats(q)
	var all []Result
	for _, c := range ix.canonicals {
		if !ix.matches(c, q) {
			continue
		}
		r := result(c)
		r.Score = ix.score(c, q, corpus)
		all = append(all, r)
	}
	ix.rank(all, q)
	return len(all), window(all, offset, limit)
}

// window returns at most limit of rs from offset on.
func window(rs []Result, offset, limit int) []Result {
	if offset < 0 {
		offset = 0
	}
	if offset >= len(rs) || limit <= 0 {
		return nil
	}
	return rs[offset:min(len(rs), offset+limit)]
}

// Top returns the first n canonicals by inbound count descending, then URL
// ascending (none if n <= 0).
func (ix *Index) Top(n int) []Result {
	_, out := ix.TopPage(0, n)
	return out
}

// TopPage returns the number of canonicals and at most limit of them from
// offset on, by inbound count descending, then URL ascending.
func (ix *Index) TopPage(offset, limit int) (total int, results []Result) {
	var all []Result
	for _, c := range ix.canonicals {
		all = append(all, result(c))
	}
	return len(all), window(all, offset, limit)
}

// Site returns the number of canonicals whose URL has host host, and at
// most limit of them from offset on, ordered as TopPage orders them.
func (ix *Index) Site(host string, offset, limit int) (total int, results []Result) {
	var all []Result
	for _, c := range ix.canonicals {
		if u, err := url.Parse(c.URL); err == nil && u.Host == host {
			all = append(all, result(c))
		}
	}
	return len(all), window(all, offset, limit)
}

// result describes canonical c as a search or top-list entry.
func result(c *Page) Result {
	return Result{URL: c.URL, Title: cutTitle(c.Title), InboundCount: c.InboundCount, TextBytes: c.TextBytes}
}

// cutTitle returns the longest prefix of title of at most ResultTitleBytes
// bytes that is followed by the start of a UTF-8 sequence, by nothing, or
// is empty.
func cutTitle(title string) string {
	cut := title
	for len(cut) > ResultTitleBytes || (len(cut) > 0 && len(cut) < len(title) && !utf8.RuneStart(title[len(cut)])) {
		cut = cut[:len(cut)-1]
	}
	return cut
}
