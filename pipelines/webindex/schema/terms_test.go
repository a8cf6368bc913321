package schema

import (
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// TermCounts splits a text into the terms extract.Terms finds, and counts
// every word: a posting's term frequency and a cluster's length must
// agree with the terms a page is searched by, whatever the text holds
// (upper case beyond ASCII, digits, invalid UTF-8, separators at either
// end).
func FuzzTermCounts(f *testing.F) {
	for _, s := range []string{
		"", " ", "Hello, World! hello", "ÄBC äbc straße STRASSE", "x1 2y 3", "a\xffb \xc3", "…end.", "日本語 テキスト",
		"İstanbul ıi", "--a--", "ǅemal ǆ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		counts, words := TermCounts(text)
		fields := strings.FieldsFunc(text, func(r rune) bool { return !IsWordRune(r) })
		if words != int64(len(fields)) {
			t.Fatalf("%q: %d words, want %d", text, words, len(fields))
		}
		want := map[string]int64{}
		for _, f := range fields {
			want[strings.ToLower(f)]++
		}
		if len(counts) != len(want) {
			t.Fatalf("%q: counts %v, want %v", text, counts, want)
		}
		for term, n := range want {
			if counts[term] != n {
				t.Fatalf("%q: counts %v, want %v", text, counts, want)
			}
		}
		if got, want := SortedTerms(counts), extract.Terms(text); !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Fatalf("%q: terms %q, extract.Terms %q", text, got, want)
		}
	})
}
