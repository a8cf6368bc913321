package extract

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Contract: terms = every token (words, compounds, camelCase parts),
// lowercased, distinct, sorted.
func TestTerms(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"punctuation only", " -- !! ", nil},
		{"split and lowercase", "Hello, World! hello", []string{"hello", "world"}},
		{"digits are term characters", "route 66 and A1-b2", []string{"66", "a1", "and", "b2", "route"}},
		{"unicode letters", "Ünïcödé ÄPFEL straße 東京タワー", []string{"straße", "äpfel", "ünïcödé", "東京タワー"}},
		{"apostrophe splits", "don't", []string{"don", "t"}},
		{"snake case whole and split", "snake_case", []string{"case", "snake", "snake_case"}},
		{"sorted bytewise", "b B a 10 9", []string{"10", "9", "a", "b"}},
		{"push_back", "v.push_back(x)", []string{"back", "push", "push_back", "v", "v.push_back", "x"}},
		{"std::sort", "Use std::sort.", []string{"sort", "std", "std::sort", "use"}},
		{"unique_ptr in a namespace", "std::unique_ptr<T>", []string{"ptr", "std", "std::unique_ptr", "t", "unique", "unique_ptr"}},
		{"memcpy_s", "memcpy_s()", []string{"memcpy", "memcpy_s", "s"}},
		{"camel case and member", "HashMap.computeIfAbsent", []string{"absent", "compute", "computeifabsent", "hash", "hashmap", "hashmap.computeifabsent", "if", "map"}},
		{"chains of segments", "os.path.join", []string{"join", "os", "os.path", "os.path.join", "path", "path.join"}},
		{"arrow", "p->next", []string{"next", "p", "p->next"}},
		{"template breaks an identifier", "std::vector<T,Allocator>::push_back", []string{"allocator", "back", "push", "push_back", "std", "std::vector", "t", "vector"}},
		{"sentence end is no joiner", "Call it. Then stop.", []string{"call", "it", "stop", "then"}},
		{"dunder", "__init__", []string{"__init__", "init"}},
		{"underscores alone", "a __ b", []string{"a", "b"}},
		{"acronym then word", "HTTPServer", []string{"http", "httpserver", "server"}},
		{"acronym plural stays", "URLs getURLs", []string{"get", "geturls", "urls"}},
		{"capitalized word is one part", "Vector VECTOR", []string{"vector"}},
		{"non-ASCII camel case", "ÉcoleNormale", []string{"normale", "école", "écolenormale"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Terms(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Terms(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestTokenizeKindsAndPositions checks what each token is and where:
// words are numbered, compounds and parts carry the position of the last
// word before them.
func TestTokenizeKindsAndPositions(t *testing.T) {
	var got []string
	Tokenize("Call vector::push_back, then HashMap", func(term string, kind TokenKind, pos int) bool {
		got = append(got, fmt.Sprintf("%s/%d/%d", term, kind, pos))
		return true
	})
	want := []string{
		"call/0/0", "vector/0/1", "push/0/2", "back/0/3", "push_back/1/3", "vector::push_back/1/3",
		"then/0/4", "hashmap/0/5", "hash/2/5", "map/2/5",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("tokens\n got %q\nwant %q", got, want)
	}
}

// TestTokenizeStops checks that Tokenize stops as soon as yield says so,
// inside an identifier too.
func TestTokenizeStops(t *testing.T) {
	for _, stopAt := range []int{1, 2, 3, 5} {
		n := 0
		Tokenize("os.path.join HashMap more words", func(string, TokenKind, int) bool {
			n++
			return n < stopAt
		})
		if n != stopAt {
			t.Errorf("stopping at token %d: yield called %d times", stopAt, n)
		}
	}
}

// TestTokenizeLongChainIsLinear checks that an identifier of many
// segments yields a number of tokens linear in its length.
func TestTokenizeLongChainIsLinear(t *testing.T) {
	segs := make([]string, 1000)
	for i := range segs {
		segs[i] = fmt.Sprintf("s%d", i)
	}
	n := 0
	Tokenize(strings.Join(segs, "."), func(string, TokenKind, int) bool { n++; return true })
	// 1000 words, the whole, and the chains of 2, 3 and 4 segments.
	if want := 1000 + 1 + 999 + 998 + 997; n != want {
		t.Errorf("%d tokens, want %d", n, want)
	}
}

func TestParseQuery(t *testing.T) {
	for _, tc := range []struct {
		in               string
		words, compounds []string
	}{
		{"", nil, nil},
		{"vector push_back", []string{"back", "push", "vector"}, []string{"push_back"}},
		{"std::sort std::sort", []string{"sort", "std"}, []string{"std::sort"}},
		{"HashMap.computeIfAbsent", []string{"computeifabsent", "hashmap"}, []string{"hashmap.computeifabsent"}},
		{"CREATE INDEX", []string{"create", "index"}, nil},
	} {
		q := ParseQuery(tc.in)
		if !reflect.DeepEqual(q.Words, tc.words) || !reflect.DeepEqual(q.Compounds, tc.compounds) {
			t.Errorf("ParseQuery(%q) = %q %q, want %q %q", tc.in, q.Words, q.Compounds, tc.words, tc.compounds)
		}
	}
	if got, want := ParseQuery("b_a a").Terms(), []string{"a", "b", "b_a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Terms = %q, want %q", got, want)
	}
}

func BenchmarkTokenize(b *testing.B) {
	text := strings.Repeat("The quick brown fox calls std::vector<int>::push_back and HashMap.computeIfAbsent on os.path.join. ", 100)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Tokenize(text, func(string, TokenKind, int) bool { return true })
	}
}
