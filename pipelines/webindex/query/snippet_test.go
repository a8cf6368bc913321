package query

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSnippet(t *testing.T) {
	far := strings.Repeat("zzz ", 200)
	tests := []struct {
		name, text string
		terms      []string
		want       string   // the snippet's text, or a part of it with the prefix "~"
		marks      []string // the highlighted words
	}{
		{"short", "Event loop: the EVENT", []string{"event", "loop"}, "Event loop: the EVENT", []string{"Event", "loop", "EVENT"}},
		{"best passage", "loop " + far + "asyncio event loop here " + far, []string{"asyncio", "event", "loop"}, "~asyncio event loop here", []string{"asyncio", "event", "loop"}},
		{"no term", "plain text", []string{"absent"}, "plain text", nil},
		{"not inside words", "evented loops", []string{"event", "loop"}, "evented loops", nil},
		{"utf-8", strings.Repeat("ü", 300) + " Über ü", []string{"über"}, "~Über", []string{"Über"}},
		{"one huge word", strings.Repeat("x", 1000), []string{strings.Repeat("x", 1000)}, "~xxx", []string{strings.Repeat("x", SnippetBytes)}},
	}
	for _, tt := range tests {
		s := makeSnippet(tt.text, tt.terms)
		if !utf8.ValidString(s.Text) {
			t.Errorf("%s: snippet is not UTF-8: %q", tt.name, s.Text)
		}
		if len(s.Text) > SnippetBytes+2*len("… ") {
			t.Errorf("%s: snippet of %d bytes", tt.name, len(s.Text))
		}
		if w, ok := strings.CutPrefix(tt.want, "~"); ok && !strings.Contains(s.Text, w) || !ok && s.Text != tt.want {
			t.Errorf("%s: snippet %q, want %q", tt.name, s.Text, tt.want)
		}
		var marks []string
		for _, h := range s.Highlights {
			marks = append(marks, s.Text[h[0]:h[1]])
		}
		if strings.Join(marks, "|") != strings.Join(tt.marks, "|") {
			t.Errorf("%s: highlights %q, want %q", tt.name, marks, tt.marks)
		}
	}
}

// Rule: text a site repeats across the results of a page (its navigation
// bar) is left out of their snippets: the snippet is the passage of the
// page's own text holding the query's terms, not the bar that happens to
// repeat the page's title. A page alone from its site on the page keeps
// its snippet as before: nothing shows its text is repeated.
func TestSnippetsLeaveOutWhatTheSiteRepeats(t *testing.T) {
	nav := "Prev Up SQL Commands Home Next"
	page := func(title, body string) string {
		return title + " " + title + " " + nav + " " + title + " " + body
	}
	urls := []string{"http://docs.example/vacuum.html", "http://docs.example/analyze.html", "http://docs.example/cluster.html", "http://other.example/"}
	texts := []string{
		page("VACUUM", "garbage-collect and optionally analyze a database. VACUUM reclaims storage occupied by dead tuples."),
		page("ANALYZE", "collect statistics about a database, which the planner uses."),
		page("CLUSTER", "cluster a table according to an index, which vacuum does not do."),
		"VACUUM VACUUM " + nav + " VACUUM reclaims storage on the other site.",
	}
	got := makeSnippets(urls, texts, []string{"vacuum"})
	if strings.Contains(got[0].Text, "Prev Up") || !strings.Contains(got[0].Text, "garbage-collect") {
		t.Errorf("the snippet of the VACUUM page holds the site's navigation or misses its text: %q", got[0].Text)
	}
	if len(got[0].Highlights) == 0 {
		t.Errorf("the VACUUM page's snippet marks no term: %+v", got[0])
	}
	if !strings.Contains(got[2].Text, "vacuum does not do") {
		t.Errorf("the CLUSTER page's snippet: %q, want its own sentence with the term", got[2].Text)
	}
	if want := makeSnippet(texts[3], []string{"vacuum"}); got[3].Text != want.Text {
		t.Errorf("a page alone from its site: %q, want as before %q", got[3].Text, want.Text)
	}
	if old := makeSnippet(texts[0], []string{"vacuum"}); !strings.Contains(old.Text, "Prev Up") {
		t.Errorf("without the site's other pages the snippet would not hold the navigation (%q): the test shows nothing", old.Text)
	}
}
