package batch

import (
	"math"
	"strings"
	"unicode"
)

// Scoring holds the parameters of a search result's score:
//
//	score  = bm25 × (1 + RankWeight × ln(1 + rank of the canonical))
//	bm25   = Σ over query terms t of idf(t) × tf' × (K1 + 1) / (tf' + K1 × (1 − B + B × len / avglen))
//	idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//	tf'    = tf(t) + TitleWeight × titleTF(t)
//
// N counts the canonicals with at least one term, df(t) those holding t,
// tf(t) the occurrences of t among the words of the canonical's text (runs
// of letters and digits, lowercased), titleTF(t) its occurrences in the
// canonical's result title, len the number of words of the text and avglen
// the mean of len over the N canonicals. The query terms are summed in
// sorted order.
type Scoring struct {
	K1, B, TitleWeight, RankWeight float64
}

// DefaultScoring returns the parameters Compute scores with.
func DefaultScoring() Scoring { return Scoring{K1: 1.2, B: 0.75, TitleWeight: 2, RankWeight: 0.5} }

// WithScoring returns a copy of ix whose searches score with s.
func (ix *Index) WithScoring(s Scoring) *Index {
	c := *ix
	c.scorer = s
	return &c
}

// textStats is what scoring needs of a canonical.
type textStats struct {
	counts map[string]int64
	words  int64
	rank   int64
}

// countWords counts the words of text by term.
func countWords(text string) *textStats {
	ts := &textStats{counts: map[string]int64{}}
	var w []rune
	end := func() {
		if len(w) > 0 {
			ts.counts[strings.ToLower(string(w))]++
			ts.words++
			w = w[:0]
		}
	}
	for _, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			w = append(w, r)
		} else {
			end()
		}
	}
	end()
	return ts
}

// corpusStats returns, for the (sorted, distinct) query terms q, the
// number of canonicals with words, each term's document frequency, and
// the mean number of words.
func (ix *Index) corpusStats(q []string) (n int64, df []int64, avg float64) {
	var total int64
	df = make([]int64, len(q))
	for _, ts := range ix.text {
		if len(ts.counts) == 0 {
			continue
		}
		n++
		total += ts.words
		for i, t := range q {
			if ts.counts[t] > 0 {
				df[i]++
			}
		}
	}
	return n, df, float64(total) / float64(n)
}

// score computes canonical c's score for the (sorted, distinct) query
// terms q, given corpusStats(q).
func (ix *Index) score(c *Page, q []string, n int64, df []int64, avg float64) float64 {
	self := ix.text[c.URL]
	title := countWords(cutTitle(c.Title))
	s := ix.scorer
	sum := 0.0
	for i, t := range q {
		idf := math.Log(1 + (float64(n)-float64(df[i])+0.5)/(float64(df[i])+0.5))
		tf := float64(self.counts[t]) + s.TitleWeight*float64(title.counts[t])
		sum += idf * (tf * (s.K1 + 1) / (tf + s.K1*(1-s.B+s.B*float64(self.words)/avg)))
	}
	return sum * (1 + s.RankWeight*math.Log(1+float64(self.rank)))
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
