package batch

import (
	"cmp"
	"slices"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"
)

// Scoring holds the parameters of a search result's score: see package
// scoring for the formula. The query's terms are extract.ParseQuery's; a
// canonical's text frequencies count the tokens of its text
// (extract.Tokenize), its length its words, and its anchor frequencies the
// distinct loaded pages outside its cluster whose anchors to any member
// hold the term (rounded down to a power of two: scoring.AnchorCount); N, the document frequencies and the mean text length
// are taken over the canonicals with text, and the mean anchor length is
// the number of distinct anchor terms of every link out of the loaded
// pages over N.
type Scoring = scoring.Params

// DefaultScoring returns the parameters Compute scores with.
func DefaultScoring() Scoring { return scoring.Params{}.Effective() }

// WithScoring returns a copy of ix whose searches score with s.
func (ix *Index) WithScoring(s Scoring) *Index {
	c := *ix
	c.scorer = s.Effective()
	return &c
}

// textStats is what scoring needs of a canonical.
type textStats struct {
	counts  map[string]int64
	words   int64
	anchors map[string]int64
	rank    int64
	text    string
}

// countWords counts the tokens of text by term, and its words.
func countWords(text string) *textStats {
	ts := &textStats{counts: map[string]int64{}, text: text}
	extract.Tokenize(text, func(t string, kind extract.TokenKind, _ int) bool {
		ts.counts[t]++
		if kind == extract.Word {
			ts.words++
		}
		return true
	})
	return ts
}

// anchorCounts counts, for each term, the distinct sources of links whose
// anchors hold it, rounded as scoring.AnchorCount rounds them.
func anchorCounts(links []Inlink) map[string]int64 {
	terms := map[string]map[string]bool{} // term -> sources
	for _, l := range links {
		for _, a := range l.Anchors {
			for _, t := range extract.Terms(a) {
				if terms[t] == nil {
					terms[t] = map[string]bool{}
				}
				terms[t][l.Source] = true
			}
		}
	}
	out := map[string]int64{}
	for t, sources := range terms {
		out[t] = scoring.AnchorCount(int64(len(sources)))
	}
	return out
}

// anchorLen is the length of an anchor field: the sum of its counts.
func anchorLen(anchors map[string]int64) int64 {
	var n int64
	for _, c := range anchors {
		n += c
	}
	return n
}

// corpusStats returns the statistics of q's terms over the canonicals
// with text.
func (ix *Index) corpusStats(q *scoring.Query) *scoring.Corpus {
	var n, words int64
	df := make([]int64, len(q.Terms))
	for _, ts := range ix.text {
		if len(ts.counts) == 0 {
			continue
		}
		n++
		words += ts.words
		for i, t := range q.Terms {
			if ts.counts[t] > 0 || ts.anchors[t] > 0 {
				df[i]++
			}
		}
	}
	return scoring.NewCorpus(n, words, ix.anchorTerms, df)
}

// matches reports whether canonical c holds every word of q in its text
// or anchor text.
func (ix *Index) matches(c *Page, q *scoring.Query) bool {
	ts := ix.text[c.URL]
	if len(ts.counts) == 0 {
		return false
	}
	for _, w := range q.Words {
		if ts.counts[w] == 0 && ts.anchors[w] == 0 {
			return false
		}
	}
	return true
}

// score returns canonical c's base score for q in corpus.
func (ix *Index) score(c *Page, q *scoring.Query, corpus *scoring.Corpus) float64 {
	ts := ix.text[c.URL]
	d := scoring.Doc{Body: make([]int64, len(q.Terms)), Anchor: make([]int64, len(q.Terms)),
		BodyLen: ts.words, AnchorLen: anchorLen(ts.anchors), Title: cutTitle(c.Title), URL: c.URL, Prior: float64(ts.rank)}
	for i, t := range q.Terms {
		d.Body[i], d.Anchor[i] = ts.counts[t], ts.anchors[t]
	}
	return ix.scorer.Base(q, corpus, &d)
}

// rank orders results by score, then inbound count, then URL, and reranks
// the best by closeness (see package scoring).
func (ix *Index) rank(all []Result, q *scoring.Query) {
	order := func(a, b Result) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(b.InboundCount, a.InboundCount), cmp.Compare(a.URL, b.URL))
	}
	slices.SortFunc(all, order)
	if !ix.scorer.Reranks(q) {
		return
	}
	for i := range all[:min(len(all), ix.scorer.RerankDepth)] {
		all[i].Score = ix.scorer.Final(q, all[i].Score, all[i].Title, scoring.Excerpt(ix.text[all[i].URL].text))
	}
	slices.SortFunc(all, order)
}

// Stats counts what the index holds.
type Stats struct {
	// Pages is the number of loaded pages, Links their distinct outlinks.
	Pages, Links int64
	// Clusters is the number of duplicate clusters, TextClusters those
	// whose text has words, Words the words of those texts.
	Clusters, TextClusters, Words int64
}

// Stats returns the counts of the index.
func (ix *Index) Stats() Stats {
	s := Stats{Pages: int64(len(ix.pages)), Links: ix.links, Clusters: int64(len(ix.canonicals))}
	for _, ts := range ix.text {
		if len(ts.counts) > 0 {
			s.TextClusters++
			s.Words += ts.words
		}
	}
	return s
}
