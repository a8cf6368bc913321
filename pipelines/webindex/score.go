package webindex

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/trickle-dev/trickle/internal/codec"
)

// Scoring sets how Search orders its matches. A match is a cluster whose
// text holds every query term; its score is
//
//	score = bm25 × (1 + RankWeight × ln(1 + rank))
//
// where rank is the canonical's rank by Options.Ranker (by default its
// inlink count; with a PageRank ranker, that ranker's integer score) and
// bm25 is summed over the query terms t:
//
//	idf(t) = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//	tf'    = tf(t) + TitleWeight × titleTF(t)
//	bm25   = Σ idf(t) × tf' × (K1 + 1) / (tf' + K1 × (1 − B + B × len/avglen))
//
// N is the number of clusters with text, df(t) the number of them holding
// t, tf(t) how often t occurs in the cluster's text (which includes the
// title), titleTF(t) how often it occurs in the canonical's result title,
// len the number of words of the text and avglen their mean over the N
// clusters. The multiplicative rank term leaves a page that is not about
// the query (small bm25) behind one that is, however popular, and orders
// pages about it equally well by popularity; the logarithm keeps a rank
// of thousands from swamping the text. Any Ranker plugs in: its rank of
// the canonical is kept in the cluster's state when the cluster is
// recomputed. A ranker on another scale (PageRankRanker's ranks are
// PageRank × PageRankScale) may want its own RankWeight.
//
// Ties go to the larger inbound count, then to the smaller URL.
type Scoring struct {
	// K1 saturates term frequency: the higher, the more a repeated term
	// counts. Default: 1.2.
	K1 float64
	// B is how much a long text's matches are discounted, from 0 (not at
	// all) to 1 (in proportion to its length). Default: 0.75; a negative
	// value stands for 0.
	B float64
	// TitleWeight is how many extra occurrences a term in the title
	// counts for (it also counts once in the text). Default: 2; a
	// negative value stands for 0.
	TitleWeight float64
	// RankWeight (α) is the weight of the link-based rank. Default: 0.5;
	// a negative value stands for 0, which ranks by text alone.
	RankWeight float64
}

// EnsureDefaults fills unset fields and returns s.
func (s *Scoring) EnsureDefaults() *Scoring {
	if s.K1 == 0 {
		s.K1 = 1.2
	}
	if s.B == 0 {
		s.B = 0.75
	}
	if s.TitleWeight == 0 {
		s.TitleWeight = 2
	}
	if s.RankWeight == 0 {
		s.RankWeight = 0.5
	}
	return s
}

// effective returns s with its defaults filled in and negative weights
// (which stand for 0) made 0: the values the formulas use.
func (s Scoring) effective() Scoring {
	s.EnsureDefaults()
	s.B, s.TitleWeight, s.RankWeight = max(s.B, 0), max(s.TitleWeight, 0), max(s.RankWeight, 0)
	return s
}

// Validate reports the first unusable field.
func (s *Scoring) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case bad(s.K1) || s.K1 < 0:
		return fmt.Errorf("%w: Scoring.K1 %v must be a positive number", ErrInvalidOptions, s.K1)
	case bad(s.B) || s.B > 1:
		return fmt.Errorf("%w: Scoring.B %v must be at most 1", ErrInvalidOptions, s.B)
	case bad(s.TitleWeight):
		return fmt.Errorf("%w: Scoring.TitleWeight %v must be a number", ErrInvalidOptions, s.TitleWeight)
	case bad(s.RankWeight):
		return fmt.Errorf("%w: Scoring.RankWeight %v must be a number", ErrInvalidOptions, s.RankWeight)
	}
	return nil
}

// termScore is the BM25 contribution of one query term to one match. The
// batch computation evaluates the same expression, in the same order, so
// that both give bit-identical scores.
func (s *Scoring) termScore(n, df, tf, titleTF, length int64, avgLen float64) float64 {
	idf := math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
	w := float64(tf) + s.TitleWeight*float64(titleTF)
	norm := s.K1 * (1 - s.B + s.B*float64(length)/avgLen)
	return idf * (w * (s.K1 + 1) / (w + norm))
}

// boost is the rank factor of a match's score.
func (s *Scoring) boost(rank int64) float64 {
	return 1 + s.RankWeight*math.Log(1+float64(max(rank, 0)))
}

// isWordRune reports whether r is part of a search term: terms are the
// maximal runs of letters and digits (as extract.Terms splits them).
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// termCounts counts the occurrences of each search term of text, and all
// of them: the term frequencies and the length BM25 weighs. It walks the
// text once and keys the counts by slices of it (ToLower copies only a
// word with upper case or beyond ASCII): splitting the text into a slice
// of words first was most of a bulk load's allocations.
func termCounts(text string) (counts map[string]int64, words int64) {
	counts = map[string]int64{}
	start := -1 // of the current word
	for i, r := range text {
		switch {
		case isWordRune(r):
			if start < 0 {
				start = i
			}
		case start >= 0:
			counts[strings.ToLower(text[start:i])]++
			words++
			start = -1
		}
	}
	if start >= 0 {
		counts[strings.ToLower(text[start:])]++
		words++
	}
	return counts, words
}

// sortedTerms returns the keys of counts, sorted: what extract.Terms
// returns for the same text.
func sortedTerms(counts map[string]int64) []string {
	out := make([]string, 0, len(counts))
	for t := range counts {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// postingVersion tags a posting value. A posting written before scoring
// existed has an empty value; it scores as one occurrence (see readTF).
const postingVersion = 1

// encodePosting is the value of a cluster's posting under a term: how
// often the term occurs in the cluster's text.
func encodePosting(tf int64) []byte {
	return binary.AppendUvarint([]byte{postingVersion}, uint64(tf))
}

// decodePosting is the inverse of encodePosting; an empty value (an old
// store's posting) is one occurrence.
func decodePosting(b []byte) (int64, error) {
	if len(b) == 0 {
		return 1, nil
	}
	if b[0] != postingVersion {
		return 0, fmt.Errorf("%w: posting has unknown version", ErrCorrupt)
	}
	d := decoder{codec.NewReader(b[1:])}
	tf := int64(d.Uvarint())
	if d.Err() != nil || d.Len() != 0 || tf < 1 {
		return 0, fmt.Errorf("%w: posting of %d bytes is malformed", ErrCorrupt, len(b))
	}
	return tf, nil
}
