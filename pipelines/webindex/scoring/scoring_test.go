package scoring

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

func TestURLTokens(t *testing.T) {
	for in, want := range map[string]string{
		"https://en.cppreference.com/w/cpp/container/vector/push_back.html": " w cpp container vector push_back",
		"https://docs.python.org/3.11/library/os.path.html":                 " 3.11 library os.path",
		"http://example.org/a%20b/operator=.htm?x=1#f":                      " a b operator=",
		"http://example.org/": " ",
		"::":                  "",
	} {
		if got := URLTokens(in); got != want {
			t.Errorf("URLTokens(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCloseness(t *testing.T) {
	for _, tc := range []struct {
		text  string
		words []string
		want  float64
	}{
		{"create index on a table", []string{"create", "index"}, 1},
		{"index create", []string{"create", "index"}, 1},
		{"create a unique index", []string{"create", "index"}, 2.0 / 4},
		{"create x index, then create index", []string{"create", "index"}, 1},
		{"create only", []string{"create", "index"}, 0},
		{"std::vector<T>::push_back", []string{"back", "push", "vector"}, 3.0 / 4},
		{"one word", []string{"one"}, 0},
	} {
		if got := Closeness(tc.text, tc.words); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Closeness(%q, %q) = %v, want %v", tc.text, tc.words, got, tc.want)
		}
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		p    Params
		name string
	}{
		{Params{K1: -1}, "K1"},
		{Params{BodyB: 2}, "BodyB"},
		{Params{AnchorB: math.NaN()}, "AnchorB"},
		{Params{URLWeight: math.Inf(1)}, "URLWeight"},
		{Params{PriorCap: -3}, "PriorCap"},
	} {
		err := tc.p.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.p, err, tc.name)
		}
	}
	if err := (&Params{}).Validate(); err != nil {
		t.Errorf("zero Params: %v", err)
	}
}

// TestBaseWeighsFields checks the base score's parts one by one on a
// query of one word: each field adds, the title and anchor matches
// multiply, and the prior is capped at PriorWeight.
func TestBaseWeighsFields(t *testing.T) {
	p := Params{}.Effective()
	q := NewQuery(extract.ParseQuery("sort"))
	c := NewCorpus(100, 1000, 500, []int64{10})
	doc := func() *Doc {
		return &Doc{Body: []int64{1}, Anchor: []int64{0}, BodyLen: 10, AnchorLen: 5, URL: "http://x.example/a.html"}
	}
	body := p.Base(q, c, doc())
	inURL := doc()
	inURL.URL = "http://x.example/sort.html"
	inTitle := doc()
	inTitle.Title = "sort"
	inAnchor := doc()
	inAnchor.Anchor[0] = 3
	if s := p.Base(q, c, inURL); s <= body {
		t.Errorf("a match in the URL too: %v, not above %v", s, body)
	}
	// In the title: a higher blended frequency and every word in it.
	if s := p.Base(q, c, inTitle); s <= body*(1+p.TitleMatchBoost) {
		t.Errorf("a match in the title too: %v, not above %v", s, body*(1+p.TitleMatchBoost))
	}
	if s := p.Base(q, c, inAnchor); s <= body*(1+p.AnchorMatchBoost) {
		t.Errorf("a match in the anchors too: %v, not above %v", s, body*(1+p.AnchorMatchBoost))
	}
	for _, rank := range []float64{1, 10, 999} {
		d := doc()
		d.Prior = rank
		want := body * (1 + p.PriorWeight*math.Log1p(rank)/math.Log1p(p.PriorCap))
		if s := p.Base(q, c, d); math.Abs(s-want) > 1e-12 {
			t.Errorf("rank %v: %v, want %v", rank, s, want)
		}
	}
	huge := doc()
	huge.Prior = 1e9
	if s := p.Base(q, c, huge); math.Abs(s-body*(1+p.PriorWeight)) > 1e-12 {
		t.Errorf("a rank beyond the cap: %v, want %v", s, body*(1+p.PriorWeight))
	}
}

func TestAnchorCount(t *testing.T) {
	for n, want := range map[int64]int64{-1: 0, 0: 0, 1: 1, 2: 2, 3: 2, 4: 4, 7: 4, 8: 8, 1000: 512} {
		if got := AnchorCount(n); got != want {
			t.Errorf("AnchorCount(%d) = %d, want %d", n, got, want)
		}
	}
}
