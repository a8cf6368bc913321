// Package scoring is the formula search orders its results by: a
// field-aware BM25 (BM25F) over a page's title, the anchor text of the
// links into it, its URL and its text, boosts for a query found whole in
// the title or the anchor text or close together, and a gentle link-based
// prior. The incremental index (package webindex) and its from-scratch
// reference (package batch) both score with it, from statistics each keeps
// its own way, so that the two agree to the last bit.
//
// # The score
//
// A query is its words and its identifiers (extract.ParseQuery). A page
// matches when every word is in its text or in the anchor text of the
// links into it. For each query term t (words and identifiers, in sorted
// order) its fields' term frequencies are blended:
//
//	tf~(t) = BodyWeight·tf_body/(1 − BodyB + BodyB·len_body/avg_body)
//	       + AnchorWeight·tf_anchor/(1 − AnchorB + AnchorB·len_anchor/avg_anchor)
//	       + TitleWeight·tf_title + URLWeight·tf_url
//	idf(t) = ln(1 + (N − df(t) + 0.5)/(df(t) + 0.5))
//	bm25f  = Σ_t idf(t)·tf~(t)·(K1 + 1)/(tf~(t) + K1)
//
// tf_body counts t among the tokens of the page's text, tf_title among its
// result title's, tf_url among its URL path's (URLTokens); tf_anchor is the
// number of distinct pages outside its duplicate cluster whose links into
// the cluster have t in their anchor text, rounded down to a power of two
// (AnchorCount) — each source counts once per term, however many links or
// navigation bars it has, so that the pages linking everywhere do not
// swamp the text of those linking to the page about something. len_body is the number of words of the text, len_anchor
// the sum of its tf_anchor over its terms; avg_body is the mean of len_body over the
// N pages with text, avg_anchor the number of distinct anchor terms of
// every link out of the loaded pages over N (what the anchor fields add
// up to, but for links to pages not loaded or within a cluster, and
// kept without touching the popular pages' rows), and df(t) the number of
// the N pages whose text or anchor text holds t. Titles and URLs are short and alike in length, so
// they are not length-normalized. Because the fields are blended before
// the saturation, a term frequent in one field cannot outweigh the other
// terms: a hub page whose text mentions every name of a library scores
// less than the page whose title, URL and inlinks name the query.
//
// The base score multiplies bm25f by two factors:
//
//	base = bm25f × (1 + TitleMatchBoost·[every word in the title] + AnchorMatchBoost·[every word in the anchor text])
//	             × (1 + PriorWeight·prior)
//	prior = min(1, ln(1 + rank)/ln(1 + PriorCap))
//
// rank is the canonical's rank by the index's Ranker: its number of
// distinct linking pages by default, its PageRank (scaled to average 1
// over the pages) with a PageRank ranker. The prior is log-damped and
// capped, and weighs at most PriorWeight (10 %): it breaks ties between
// pages about the query, and a page with thousands of inlinks cannot beat
// the page about the query on links alone.
//
// The RerankDepth best results by base score (then by inbound count, then
// URL) are then reranked, for a query of several words, by how close
// together its words are in the title and in the text's excerpt (the first
// ExcerptBytes of it, which search results keep for snippets):
//
//	final = base × (1 + PhraseBoost·closeness(title) + ProximityBoost·closeness(excerpt))
//
// closeness is the number of query words over the number of words of the
// shortest passage holding them all (1 for the words in a row, 0 when some
// is missing). The bonuses are never negative, so the reranked results
// stay ahead of the rest; Search orders by final score, then inbound
// count, then URL.
package scoring

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// Params are the weights of the score. The zero value stands for the
// defaults (EnsureDefaults); a negative weight or boost stands for 0.
type Params struct {
	// K1 saturates a term's blended frequency: the higher, the more a
	// repeated term counts. Default: 1.2.
	K1 float64
	// BodyWeight is the weight of a term in the page's text. Default: 1.
	BodyWeight float64
	// BodyB is how much a long text's matches are discounted, from 0 (not
	// at all) to 1 (in proportion to its length). Default: 0.75.
	BodyB float64
	// AnchorWeight is the weight of a distinct linking page whose anchor
	// text holds the term. Default: 2.
	AnchorWeight float64
	// AnchorB is BodyB for the anchor text. Default: 0.5.
	AnchorB float64
	// TitleWeight is the weight of a term in the title. Default: 3.
	TitleWeight float64
	// URLWeight is the weight of a term in the URL's path. Default: 2.
	URLWeight float64
	// TitleMatchBoost is added to the multiplier of a page whose title
	// holds every word of the query. Default: 0.5.
	TitleMatchBoost float64
	// AnchorMatchBoost is added to the multiplier of a page whose anchor
	// text holds every word of the query. Default: 0.25.
	AnchorMatchBoost float64
	// PhraseBoost is the bonus of a query's words in a row in the title
	// (scaled down as they spread out). Default: 0.5.
	PhraseBoost float64
	// ProximityBoost is the bonus of a query's words in a row in the
	// text's excerpt (scaled down as they spread out). Default: 0.25.
	ProximityBoost float64
	// RerankDepth is how many of the best results by base score a query
	// of several words reranks by closeness, reading each one's excerpt.
	// Default: 50; negative: none.
	RerankDepth int
	// PriorWeight is the most the link-based prior multiplies a score by
	// (as 1 + PriorWeight). Default: 0.1.
	PriorWeight float64
	// PriorCap is the rank from which the prior is at its full weight.
	// Default: 1000.
	PriorCap float64
}

// EnsureDefaults fills unset fields and returns p.
func (p *Params) EnsureDefaults() *Params {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&p.K1, 1.2)
	def(&p.BodyWeight, 1)
	def(&p.BodyB, 0.75)
	def(&p.AnchorWeight, 2)
	def(&p.AnchorB, 0.5)
	def(&p.TitleWeight, 3)
	def(&p.URLWeight, 2)
	def(&p.TitleMatchBoost, 0.5)
	def(&p.AnchorMatchBoost, 0.25)
	def(&p.PhraseBoost, 0.5)
	def(&p.ProximityBoost, 0.25)
	def(&p.PriorWeight, 0.1)
	def(&p.PriorCap, 1000)
	if p.RerankDepth == 0 {
		p.RerankDepth = 50
	}
	return p
}

// Effective returns p with its defaults filled in and negative weights
// made 0: the values the formulas use.
func (p Params) Effective() Params {
	p.EnsureDefaults()
	for _, v := range []*float64{&p.BodyWeight, &p.BodyB, &p.AnchorWeight, &p.AnchorB, &p.TitleWeight, &p.URLWeight,
		&p.TitleMatchBoost, &p.AnchorMatchBoost, &p.PhraseBoost, &p.ProximityBoost, &p.PriorWeight} {
		*v = max(*v, 0)
	}
	p.RerankDepth = max(p.RerankDepth, 0)
	return p
}

// ErrInvalid is wrapped by the errors Validate returns.
var ErrInvalid = errors.New("invalid scoring parameter")

// Validate reports the first unusable field, by name.
func (p *Params) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	for _, f := range []struct {
		name string
		v    float64
	}{{"BodyWeight", p.BodyWeight}, {"AnchorWeight", p.AnchorWeight}, {"TitleWeight", p.TitleWeight}, {"URLWeight", p.URLWeight},
		{"TitleMatchBoost", p.TitleMatchBoost}, {"AnchorMatchBoost", p.AnchorMatchBoost}, {"PhraseBoost", p.PhraseBoost},
		{"ProximityBoost", p.ProximityBoost}, {"PriorWeight", p.PriorWeight}} {
		if bad(f.v) {
			return fmt.Errorf("%w: Scoring.%s %v must be a number", ErrInvalid, f.name, f.v)
		}
	}
	switch {
	case bad(p.K1) || p.K1 < 0:
		return fmt.Errorf("%w: Scoring.K1 %v must be a positive number", ErrInvalid, p.K1)
	case bad(p.BodyB) || p.BodyB > 1:
		return fmt.Errorf("%w: Scoring.BodyB %v must be at most 1", ErrInvalid, p.BodyB)
	case bad(p.AnchorB) || p.AnchorB > 1:
		return fmt.Errorf("%w: Scoring.AnchorB %v must be at most 1", ErrInvalid, p.AnchorB)
	case bad(p.PriorCap) || p.PriorCap < 0:
		return fmt.Errorf("%w: Scoring.PriorCap %v must be a positive number", ErrInvalid, p.PriorCap)
	}
	return nil
}

// AnchorCount is the anchor frequency a term with n distinct sources
// scores with: n rounded down to a power of two (1, 2, 4, 8, …). The
// saturation makes the difference between 5 and 7 sources all but
// invisible in a score, and the rounding lets the index post a popular
// page's anchor terms again only when their sources double, not with
// every new link.
func AnchorCount(n int64) int64 {
	if n <= 0 {
		return 0
	}
	return 1 << (bits.Len64(uint64(n)) - 1)
}

// Query is a parsed query as the score reads it.
type Query struct {
	// Terms are the query's words and identifiers, sorted, distinct.
	Terms []string
	// Word[i] tells whether Terms[i] is a word (which a match must hold).
	Word []bool
	// Words are the words alone, sorted.
	Words []string
}

// NewQuery returns the scoring form of q.
func NewQuery(q extract.Query) *Query {
	out := &Query{Terms: q.Terms(), Words: q.Words}
	out.Word = make([]bool, len(out.Terms))
	for i, t := range out.Terms {
		out.Word[i] = contains(q.Words, t)
	}
	return out
}

func contains(sorted []string, t string) bool {
	lo, hi := 0, len(sorted)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case sorted[m] == t:
			return true
		case sorted[m] < t:
			lo = m + 1
		default:
			hi = m
		}
	}
	return false
}

// index returns the position of t in the sorted terms, or -1.
func index(sorted []string, t string) int {
	lo, hi := 0, len(sorted)
	for lo < hi {
		m := (lo + hi) / 2
		switch {
		case sorted[m] == t:
			return m
		case sorted[m] < t:
			lo = m + 1
		default:
			hi = m
		}
	}
	return -1
}

// Corpus is what the score needs of the whole index for one query.
type Corpus struct {
	// N is the number of pages (canonicals) with text.
	N int64
	// DF[i] is the number of them whose text or anchor text holds
	// Terms[i].
	DF []int64
	// AvgBody and AvgAnchor are the mean lengths of the text and the
	// anchor text over the N pages.
	AvgBody, AvgAnchor float64
}

// NewCorpus returns the corpus statistics from their sums: n pages,
// bodyWords and anchorWords the sums of their lengths, df per term. A mean
// of an empty corpus is 1.
func NewCorpus(n, bodyWords, anchorWords int64, df []int64) *Corpus {
	c := &Corpus{N: n, DF: df, AvgBody: 1, AvgAnchor: 1}
	if n > 0 && bodyWords > 0 {
		c.AvgBody = float64(bodyWords) / float64(n)
	}
	if n > 0 && anchorWords > 0 {
		c.AvgAnchor = float64(anchorWords) / float64(n)
	}
	return c
}

// Doc is what the score needs of one match.
type Doc struct {
	// Body and Anchor are the term frequencies of each query term (in
	// Query.Terms order) in the text and the anchor text.
	Body, Anchor []int64
	// BodyLen is the number of words of the text, AnchorLen the sum of
	// the anchor text's term counts.
	BodyLen, AnchorLen int64
	// Title is the result title; URL the canonical URL.
	Title, URL string
	// Prior is the rank the prior is computed from: an inlink count, or a
	// PageRank scaled to average 1.
	Prior float64
}

// Base returns the base score of d for q in c (see the package
// documentation).
func (p *Params) Base(q *Query, c *Corpus, d *Doc) float64 {
	title := countTokens(d.Title, q.Terms)
	path := countTokens(URLTokens(d.URL), q.Terms)
	normBody := 1 - p.BodyB + p.BodyB*float64(d.BodyLen)/c.AvgBody
	normAnchor := 1 - p.AnchorB + p.AnchorB*float64(d.AnchorLen)/c.AvgAnchor
	var sum float64
	allTitle, allAnchor := len(q.Words) > 0, len(q.Words) > 0
	for i := range q.Terms {
		if q.Word[i] {
			allTitle = allTitle && title[i] > 0
			allAnchor = allAnchor && d.Anchor[i] > 0
		}
		tf := p.BodyWeight*float64(d.Body[i])/normBody + p.AnchorWeight*float64(d.Anchor[i])/normAnchor +
			p.TitleWeight*float64(title[i]) + p.URLWeight*float64(path[i])
		if tf == 0 {
			continue
		}
		idf := math.Log(1 + (float64(c.N)-float64(c.DF[i])+0.5)/(float64(c.DF[i])+0.5))
		sum += idf * tf * (p.K1 + 1) / (tf + p.K1)
	}
	m := 1.0
	if allTitle {
		m += p.TitleMatchBoost
	}
	if allAnchor {
		m += p.AnchorMatchBoost
	}
	return sum * m * (1 + p.PriorWeight*p.prior(d.Prior))
}

// prior is the link-based prior of a rank, in [0, 1].
func (p *Params) prior(rank float64) float64 {
	if rank <= 0 || p.PriorCap <= 0 {
		return 0
	}
	return min(1, math.Log1p(rank)/math.Log1p(p.PriorCap))
}

// Reranks reports whether a query's results are reranked by closeness:
// it has several words and RerankDepth is positive.
func (p *Params) Reranks(q *Query) bool { return len(q.Words) > 1 && p.RerankDepth > 0 }

// Final returns the final score of a reranked result whose base score is
// base, with its title and excerpt.
func (p *Params) Final(q *Query, base float64, title, excerpt string) float64 {
	return base * (1 + p.PhraseBoost*Closeness(title, q.Words) + p.ProximityBoost*Closeness(excerpt, q.Words))
}

// countTokens counts the tokens of text (extract.Tokenize) that are among
// the sorted terms.
func countTokens(text string, terms []string) []int64 {
	out := make([]int64, len(terms))
	if text == "" {
		return out
	}
	extract.Tokenize(text, func(t string, _ extract.TokenKind, _ int) bool {
		if i := index(terms, t); i >= 0 {
			out[i]++
		}
		return true
	})
	return out
}

// webExtensions are the file extensions URLTokens drops from a path.
var webExtensions = []string{".html", ".htm", ".shtml", ".xhtml", ".php", ".asp", ".aspx", ".jsp"}

// URLTokens returns the text of a URL's path as the URL field scores it:
// percent-decoded, its "/" separators as spaces and a web page extension
// (.html, .php, …) dropped, so that ".../vector/push_back.html" reads
// "vector push_back" and ".../library/os.path.html" "library os.path".
// The host and query are not part of it.
func URLTokens(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	path := u.Path
	for _, ext := range webExtensions {
		if len(path) > len(ext) && strings.EqualFold(path[len(path)-len(ext):], ext) {
			path = path[:len(path)-len(ext)]
			break
		}
	}
	return strings.ReplaceAll(path, "/", " ")
}

// Closeness is the number of distinct words over the number of words in
// the shortest passage of text holding every one of them: 1 when they
// stand in a row (in any order), less as they spread out, 0 when some is
// missing or there are fewer than two.
func Closeness(text string, words []string) float64 {
	if len(words) < 2 || text == "" {
		return 0
	}
	// A sliding window over the text's words: the shortest span holding
	// every query word, found in one pass.
	type hit struct{ pos, word int }
	var hits []hit
	extract.Tokenize(text, func(t string, kind extract.TokenKind, pos int) bool {
		if kind == extract.Word {
			if i := index(words, t); i >= 0 {
				hits = append(hits, hit{pos, i})
			}
		}
		return true
	})
	seen := make([]int, len(words))
	have, best, lo := 0, -1, 0
	for _, h := range hits {
		if seen[h.word] == 0 {
			have++
		}
		seen[h.word]++
		for have == len(words) {
			if span := h.pos - hits[lo].pos + 1; best < 0 || span < best {
				best = span
			}
			w := hits[lo].word
			if seen[w]--; seen[w] == 0 {
				have--
			}
			lo++
		}
	}
	if best < 0 {
		return 0
	}
	return float64(len(words)) / float64(best)
}

// ExcerptBytes bounds the excerpt of a text that closeness is measured
// on, and that search results keep for their snippets.
const ExcerptBytes = 16 << 10

// Excerpt returns the first ExcerptBytes of text, cut back to a character
// boundary.
func Excerpt(text string) string {
	if len(text) <= ExcerptBytes {
		return text
	}
	n := ExcerptBytes
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n]
}

// UpperBound returns a number at least Base(q, c, d) for every document d
// whose blended frequency of each query term (tf~ in the package
// documentation) is at most tf[i], whose title can hold every word only if
// titleAll and whose anchor text only if anchorAll, and whose prior is at
// most prior (in [0, 1]; 1 bounds every document). Search uses it to stop
// scoring once no document it has not read can rank among the best; it is
// computed as Base is, then raised by a relative margin far above the
// rounding of either.
func (p *Params) UpperBound(q *Query, c *Corpus, tf []float64, titleAll, anchorAll bool, prior float64) float64 {
	idf := make([]float64, len(q.Terms))
	for i := range idf {
		idf[i] = c.IDF(i)
	}
	return p.Bound(q, idf, tf, titleAll, anchorAll, prior)
}

// IDF is the inverse document frequency of Terms[i], as Base weighs it.
func (c *Corpus) IDF(i int) float64 {
	return math.Log(1 + (float64(c.N)-float64(c.DF[i])+0.5)/(float64(c.DF[i])+0.5))
}

// Bound is UpperBound with the terms' IDF computed once (Corpus.IDF), for
// callers that bound many times.
func (p *Params) Bound(q *Query, idf, tf []float64, titleAll, anchorAll bool, prior float64) float64 {
	var sum float64
	for i := range q.Terms {
		if tf[i] <= 0 {
			continue
		}
		sat := p.K1 + 1 // the limit of the saturation, for an unbounded tf
		if !math.IsInf(tf[i], 1) {
			sat = tf[i] * (p.K1 + 1) / (tf[i] + p.K1)
		}
		sum += max(idf[i], 0) * sat
	}
	m := 1.0
	if titleAll && len(q.Words) > 0 {
		m += p.TitleMatchBoost
	}
	if anchorAll && len(q.Words) > 0 {
		m += p.AnchorMatchBoost
	}
	return sum * m * (1 + p.PriorWeight*min(1, prior)) * (1 + 1e-9)
}
