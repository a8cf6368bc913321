package webindex

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
