package webindex

import (
	"slices"
	"strings"
	"unicode/utf8"
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
		if isWordRune(r) {
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
	ws := words(text, terms)
	if len(ws) == 0 {
		return &Snippet{Text: cut(text, 0, min(len(text), SnippetBytes)), Highlights: [][2]int{}}
	}
	// For each first word, extend over the words that end within
	// SnippetBytes of its start; keep the window starting at a query term
	// with the most distinct terms. Two pointers: the end only moves
	// forward.
	seen := make([]int, len(terms))
	distinct, bestFrom, bestTo, bestN := 0, 0, 0, -1
	to := 0
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
			to++
		}
		if ws[from].term >= 0 && distinct > bestN || bestN < 0 {
			bestN, bestFrom, bestTo = distinct, from, to
		}
		if t := ws[from].term; t >= 0 && from < to {
			if seen[t]--; seen[t] == 0 {
				distinct--
			}
		}
	}
	if bestTo <= bestFrom { // one word longer than a snippet
		bestTo = bestFrom + 1
	}
	// Start a little before the first term so that it reads in context,
	// if the window leaves room.
	from := bestFrom
	for from > 0 && ws[bestTo-1].end-ws[from-1].start <= SnippetBytes && bestFrom-from < 3 {
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
	for _, w := range ws[from:bestTo] {
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
