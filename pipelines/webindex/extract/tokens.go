package extract

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// TokenKind says what a search token is; see Tokenize.
type TokenKind uint8

// Token kinds.
const (
	// Word is a maximal run of letters and digits: what a text's length
	// counts and what a query requires.
	Word TokenKind = iota
	// Compound is an identifier as a developer types it: words joined by
	// "_", or segments joined by "::", "." or "->" (push_back,
	// std::sort, os.path.join), and every shorter chain of its segments
	// (vector::push_back in std::vector::push_back).
	Compound
	// Part is one part of a camelCase or PascalCase word (hash and map in
	// HashMap; compute, if and absent in computeIfAbsent).
	Part
)

// maxChain bounds the segments of the sub-chains Tokenize emits of one
// identifier (besides the whole identifier), so that a pathological run
// like a.b.c.d.… costs linear, not quadratic, tokens.
const maxChain = 4

// Tokenize calls yield with each search token of text, in order of
// appearance, lowercased (strings.ToLower: Unicode case folding of each
// letter), until yield returns false. pos is the position of a Word among
// the text's words (0, 1, 2, …) and, for a Compound or Part, that of the
// last Word before it.
//
// Words are the maximal runs of Unicode letters and digits, so "_" and
// every punctuation split words: "push_back" is the words push and back.
// Developers type identifiers whole, so identifiers are tokens too:
//
//   - an identifier is a maximal run of letters, digits and "_", extended
//     over "::", "." and "->" wherever one stands between two such runs
//     (its segments); "std::vector<T>::push_back" holds the identifiers
//     std::vector, T and push_back, and "end." ends with the word end;
//   - an identifier of several segments is a Compound, and so is every
//     chain of 2 to 4 consecutive segments of it (os.path.join gives
//     os.path.join, os.path and path.join);
//   - a segment holding "_" and a word is a Compound (push_back, memcpy_s,
//     __init__);
//   - a word with a lower-to-upper case change, or an upper case run
//     followed by a capitalized part, yields its parts as Part tokens
//     (HashMap: hash, map; HTTPServer: http, server; getURLs: get, urls —
//     a trailing "s" stays with its acronym).
//
// So "HashMap.computeIfAbsent" is the words hashmap and computeifabsent,
// the compound hashmap.computeifabsent and the parts hash, map, compute,
// if and absent: a query typed either way finds it.
func Tokenize(text string, yield func(term string, kind TokenKind, pos int) bool) {
	t := tokenizer{text: text, yield: yield, pos: -1}
	t.run()
}

// tokenizer is the state of one Tokenize call.
type tokenizer struct {
	text  string
	yield func(string, TokenKind, int) bool
	pos   int // of the last word emitted
	segs  [][2]int
	stop  bool
	// runes and offs are a camelCase word's runes and their offsets,
	// kept to be reused.
	runes []rune
	offs  []int
}

func isIdentRune(r rune) bool { return r == '_' || isWordRune(r) }

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// identRun returns the end of the run of identifier runes starting at i.
func (t *tokenizer) identRun(i int) int {
	for i < len(t.text) {
		c := t.text[i]
		if c < utf8.RuneSelf {
			if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
				i++
				continue
			}
			return i
		}
		r, w := utf8.DecodeRuneInString(t.text[i:])
		if !isIdentRune(r) {
			return i
		}
		i += w
	}
	return i
}

// joiner returns the length of the joiner ("::", "->", ".") at i if an
// identifier rune follows it, else 0.
func (t *tokenizer) joiner(i int) int {
	n := 0
	switch {
	case strings.HasPrefix(t.text[i:], "::"), strings.HasPrefix(t.text[i:], "->"):
		n = 2
	case i < len(t.text) && t.text[i] == '.':
		n = 1
	default:
		return 0
	}
	if i+n >= len(t.text) {
		return 0
	}
	if r, _ := utf8.DecodeRuneInString(t.text[i+n:]); !isIdentRune(r) {
		return 0
	}
	return n
}

func (t *tokenizer) run() {
	text := t.text
	for i := 0; i < len(text) && !t.stop; {
		r, w := rune(text[i]), 1
		if r >= utf8.RuneSelf {
			r, w = utf8.DecodeRuneInString(text[i:])
		}
		if !isIdentRune(r) {
			i += w
			continue
		}
		t.segs = t.segs[:0]
		j := i
		for {
			end := t.identRun(j)
			t.segs = append(t.segs, [2]int{j, end})
			n := t.joiner(end)
			if n == 0 {
				j = end
				break
			}
			j = end + n
		}
		t.identifier()
		i = j
	}
}

// identifier emits the tokens of the identifier whose segments are t.segs.
func (t *tokenizer) identifier() {
	for _, s := range t.segs {
		words := 0
		for i := s[0]; i < s[1] && !t.stop; {
			if t.text[i] == '_' {
				i++
				continue
			}
			end := i
			for end < s[1] && t.text[end] != '_' {
				end++
			}
			t.word(t.text[i:end])
			words++
			i = end
		}
		if words > 0 && strings.IndexByte(t.text[s[0]:s[1]], '_') >= 0 {
			t.emit(t.text[s[0]:s[1]], Compound)
		}
	}
	n := len(t.segs)
	if n < 2 {
		return
	}
	t.emit(t.text[t.segs[0][0]:t.segs[n-1][1]], Compound)
	for l := 2; l <= min(maxChain, n-1); l++ {
		for a := 0; a+l <= n; a++ {
			t.emit(t.text[t.segs[a][0]:t.segs[a+l-1][1]], Compound)
		}
	}
}

// word emits w as a Word and, if it is camelCase, its parts.
func (t *tokenizer) word(w string) {
	if t.stop {
		return
	}
	t.pos++
	if !t.yield(strings.ToLower(w), Word, t.pos) {
		t.stop = true
		return
	}
	if !hasUpperAfterFirst(w) {
		return // nearly every word: nothing to split
	}
	t.runes = t.runes[:0]
	t.offs = t.offs[:0]
	for i, r := range w {
		t.runes = append(t.runes, r)
		t.offs = append(t.offs, i)
	}
	rs, n := t.runes, len(t.runes)
	start, split := 0, false
	for k := 1; k < n; k++ {
		next := rune(-1)
		if k+1 < n {
			next = rs[k+1]
		}
		if camelBreak(rs[k-1], rs[k], next, k+1 == n-1) {
			t.emit(w[t.offs[start]:t.offs[k]], Part)
			start, split = k, true
		}
	}
	if split {
		t.emit(w[t.offs[start]:], Part)
	}
}

// hasUpperAfterFirst reports whether w may hold a camelCase break: an
// upper-case letter (or any non-ASCII rune) after its first byte.
func hasUpperAfterFirst(w string) bool {
	for i := 1; i < len(w); i++ {
		if c := w[i]; 'A' <= c && c <= 'Z' || c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

// camelBreak reports whether a camelCase word splits before cur, which
// follows prev and precedes next (-1: none; nextLast: next ends the word):
// a lower-case letter followed by an upper-case one (hash|Map), or an
// upper-case run followed by a capitalized part (HTTP|Server), but not
// before an acronym's plural "s" (URLs).
func camelBreak(prev, cur, next rune, nextLast bool) bool {
	if !unicode.IsUpper(cur) {
		return false
	}
	if unicode.IsLower(prev) {
		return true
	}
	return unicode.IsUpper(prev) && unicode.IsLower(next) && !(nextLast && next == 's')
}

// emit yields a lower-cased Compound or Part.
func (t *tokenizer) emit(s string, kind TokenKind) {
	if t.stop {
		return
	}
	if !t.yield(strings.ToLower(s), kind, t.pos) {
		t.stop = true
	}
}

// Terms returns the search terms of text: every token Tokenize yields
// (words, compounds and camelCase parts), lowercased, without duplicates,
// sorted bytewise. Sorting and deduplicating makes the result a set the
// index can diff cheaply when a page is re-extracted.
func Terms(text string) []string {
	seen := map[string]bool{}
	var out []string
	Tokenize(text, func(term string, _ TokenKind, _ int) bool {
		if !seen[term] {
			seen[term] = true
			out = append(out, term)
		}
		return true
	})
	slices.Sort(out)
	return out
}

// Query is a search query as the index reads it.
type Query struct {
	// Words are the query's distinct words (Word tokens), sorted: a
	// result must hold every one of them.
	Words []string
	// Compounds are its distinct identifiers (Compound tokens that are
	// not also words), sorted: a result holding one scores higher, one
	// without it still matches (push_back finds "push the element to
	// the back" too, after the pages holding push_back).
	Compounds []string
}

// ParseQuery reads a query's words and compounds. camelCase parts are not
// taken from a query: its words already match the pages that hold them.
func ParseQuery(q string) Query {
	var out Query
	Tokenize(q, func(term string, kind TokenKind, _ int) bool {
		switch kind {
		case Word:
			out.Words = append(out.Words, term)
		case Compound:
			out.Compounds = append(out.Compounds, term)
		}
		return true
	})
	slices.Sort(out.Words)
	out.Words = slices.Compact(out.Words)
	slices.Sort(out.Compounds)
	out.Compounds = slices.Compact(out.Compounds)
	return out
}

// Terms returns the query's words and compounds, sorted, without
// duplicates.
func (q Query) Terms() []string {
	out := append(slices.Clone(q.Words), q.Compounds...)
	slices.Sort(out)
	return slices.Compact(out)
}
