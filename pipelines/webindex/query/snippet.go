package query

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// SnippetBytes is about how long a snippet is: a passage of at most this
// many bytes of a result's text, cut at word boundaries.
const SnippetBytes = 240

// Snippet is a passage of a search result's text. Text is plain text, not
// HTML: a client must escape it. Highlights are the query-term
// occurrences in Text as [start, end) byte offsets into its UTF-8
// encoding, in order and not overlapping. Text starts with "… " when the
// passage does not start the text and ends with " …" when it does not end
// it.
type Snippet struct {
	Text       string   `json:"text"`
	Highlights [][2]int `json:"highlights"`
}

// word is one term occurrence in a text: its byte range and whether it is
// a query term (and which).
type word struct {
	start, end int
	term       int // index into the query terms; -1 if not one
}

// words splits text into its terms' occurrences, marking those of terms
// (sorted).
func words(text string, terms []string) []word {
	var out []word
	start := -1
	flush := func(end int) {
		if start < 0 {
			return
		}
		w := word{start: start, end: end, term: -1}
		if i, ok := slices.BinarySearch(terms, strings.ToLower(text[start:end])); ok {
			w.term = i
		}
		out = append(out, w)
		start = -1
	}
	for i, r := range text {
		if schema.IsWordRune(r) {
			if start < 0 {
				start = i
			}
		} else {
			flush(i)
		}
	}
	flush(len(text))
	return out
}

// makeSnippet picks the passage of text of at most about SnippetBytes
// bytes that holds the most distinct query terms (the earliest such), and
// marks the terms in it. A text holding none of them yields its start.
func makeSnippet(text string, terms []string) *Snippet {
	return snippetOf(text, words(text, terms), nil, len(terms))
}

// snippetOf is makeSnippet of text split into ws, the words marked in
// boiler (nil: none) being text its site repeats on other pages
// (navigation, headers): a passage of them shows nothing of the page, so
// a term among them counts for nothing in choosing the passage (it is
// still marked in it), among the passages with the most distinct terms
// the one with the fewest such words wins, and the passage does not reach
// back into them. A text holding no term outside them is
// cut as if none were marked.
func snippetOf(text string, ws []word, boiler []bool, nterms int) *Snippet {
	if boiler != nil && !termOutside(ws, boiler) {
		// The page's terms are all in what its site repeats (pages much
		// alike): better a passage holding them than one holding none.
		boiler = nil
	}
	all := ws // every term is marked in the passage, the site's included
	if boiler != nil {
		ws = slices.Clone(ws)
		for i := range ws {
			if boiler[i] {
				ws[i].term = -1
			}
		}
	}
	isBoiler := func(i int) bool { return boiler != nil && boiler[i] }
	if len(ws) == 0 {
		return &Snippet{Text: cut(text, 0, min(len(text), SnippetBytes)), Highlights: [][2]int{}}
	}
	// For each first word, extend over the words that end within
	// SnippetBytes of its start; keep the window starting at a query term
	// with the most distinct terms. Two pointers: the end only moves
	// forward.
	seen := make([]int, nterms)
	distinct, boiled, bestFrom, bestTo, bestN, bestBoiled := 0, 0, 0, 0, -1, 0
	to, firstTo := 0, 0
	for from := range ws {
		if to < from {
			to = from
		}
		for to < len(ws) && ws[to].end-ws[from].start <= SnippetBytes {
			if t := ws[to].term; t >= 0 {
				if seen[t] == 0 {
					distinct++
				}
				seen[t]++
			}
			if isBoiler(to) {
				boiled++
			}
			to++
		}
		if from == 0 {
			firstTo = to
		}
		better := distinct > bestN || distinct == bestN && boiled < bestBoiled
		if ws[from].term >= 0 && better || bestN < 0 && !isBoiler(from) {
			bestN, bestBoiled, bestFrom, bestTo = distinct, boiled, from, to
		}
		if t := ws[from].term; t >= 0 && from < to {
			if seen[t]--; seen[t] == 0 {
				distinct--
			}
		}
		if isBoiler(from) && from < to {
			boiled--
		}
	}
	if bestN < 0 { // every word is the site's: its start
		bestFrom, bestTo = 0, firstTo
	}
	if bestTo <= bestFrom { // one word longer than a snippet
		bestTo = bestFrom + 1
	}
	// Start a little before the first term so that it reads in context,
	// if the window leaves room.
	from := bestFrom
	for from > 0 && ws[bestTo-1].end-ws[from-1].start <= SnippetBytes && bestFrom-from < 3 && !isBoiler(from-1) {
		from--
	}
	start, end := ws[from].start, ws[bestTo-1].end
	if end-start > SnippetBytes { // a single word longer than a snippet
		end = start + len(cut(text, start, start+SnippetBytes))
	}
	var s Snippet
	if start > 0 {
		s.Text = "… "
	}
	base := len(s.Text) - start
	s.Text += text[start:end]
	if end < len(text) {
		s.Text += " …"
	}
	s.Highlights = [][2]int{}
	for _, w := range all[from:bestTo] {
		if w.term >= 0 {
			s.Highlights = append(s.Highlights, [2]int{w.start + base, min(w.end, end) + base})
		}
	}
	return &s
}

// cut returns text[from:to] moved back to UTF-8 boundaries.
func cut(text string, from, to int) string {
	for to < len(text) && to > from && !utf8.RuneStart(text[to]) {
		to--
	}
	return text[from:to]
}

// shingle is how many words in a row make the unit of text a site is seen
// to repeat, and headWords how far into a text it is looked for: a site's
// navigation and header open its pages' text, where pairs of words such
// as "Prev Up" and "Home Next" mark it (the words between them name the
// page's place and change from page to page), while further on a pair two
// pages share is ordinary prose.
const (
	shingle   = 2
	headWords = 40
)

// repeatedWords marks, for each text of a page of results, the words of
// its head (headWords) that belong to a run of shingle words the heads of
// most of the same site's results hold too (at least three of them, and
// at least half): the text a site repeats on its pages (navigation bars,
// headers), which tells a reader nothing of the page. A pair two or a few
// of a site's pages share by chance ("a database") is not marked, and
// neither is anything of a site with fewer than three results on the
// page. hosts[i] is the site of texts[i]; ws[i] its words.
func repeatedWords(hosts []string, ws [][]word, texts []string) [][]bool {
	key := func(i, j int) string {
		var b strings.Builder
		for _, w := range ws[i][j : j+shingle] {
			b.WriteString(strings.ToLower(texts[i][w.start:w.end]))
			b.WriteByte(' ')
		}
		return b.String()
	}
	// How many results of each site hold each shingle.
	count, results := map[string]int{}, map[string]int{}
	for i := range texts {
		results[hosts[i]]++
		seen := map[string]bool{}
		for j := 0; j+shingle <= min(len(ws[i]), headWords); j++ {
			if k := hosts[i] + "\x00" + key(i, j); !seen[k] {
				seen[k] = true
				count[k]++
			}
		}
	}
	out := make([][]bool, len(texts))
	for i := range texts {
		for j := 0; j+shingle <= min(len(ws[i]), headWords); j++ {
			if n := count[hosts[i]+"\x00"+key(i, j)]; n < 3 || 2*n < results[hosts[i]] {
				continue
			}
			if out[i] == nil {
				out[i] = make([]bool, len(ws[i]))
			}
			for k := j; k < j+shingle; k++ {
				out[i][k] = true
			}
		}
	}
	return out
}

// makeSnippets makes the snippets of a page of results (texts[i] of the
// page at urls[i]), leaving out of them what the results' sites repeat
// across the page (repeatedWords).
func makeSnippets(urls, texts []string, terms []string) []*Snippet {
	hosts := make([]string, len(urls))
	ws := make([][]word, len(texts))
	for i := range texts {
		hosts[i] = schema.HostOf(urls[i])
		ws[i] = words(texts[i], terms)
	}
	boiler := repeatedWords(hosts, ws, texts)
	out := make([]*Snippet, len(texts))
	for i := range texts {
		out[i] = snippetOf(texts[i], ws[i], boiler[i], len(terms))
	}
	return out
}

// termOutside reports whether a query term occurs in ws outside the words
// boiler marks.
func termOutside(ws []word, boiler []bool) bool {
	for i, w := range ws {
		if w.term >= 0 && !boiler[i] {
			return true
		}
	}
	return false
}
