package batch

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// pg builds a page by hand, bypassing HTML, so corpora stay readable.
func pg(url, text string, links ...extract.Link) *extract.Page {
	return &extract.Page{URL: url, Title: "T " + url, Text: text, Links: links}
}

func ln(target, anchor string) extract.Link { return extract.Link{Target: target, Anchor: anchor} }

func corpus(pages ...*extract.Page) map[string]*extract.Page {
	m := map[string]*extract.Page{}
	for _, p := range pages {
		m[p.URL] = p
	}
	return m
}

// want is the hand-computed expectation for one page.
type want struct {
	canonical string
	dups      []string
	rank      int64
	inbound   int64
	inlinks   []Inlink
}

const (
	a  = "http://a.example/"
	b  = "http://b.example/"
	x  = "http://x.example/"
	y  = "http://y.example/"
	sh = "http://s.example/p"
	lg = "http://long.example/p"
)

func TestCompute(t *testing.T) {
	tests := []struct {
		name  string
		pages map[string]*extract.Page
		want  map[string]want
	}{
		{
			name:  "rank and length tie: smallest URL wins",
			pages: corpus(pg(b, "same text"), pg(a, "same text")),
			want: map[string]want{
				a: {canonical: a, dups: []string{b}},
				b: {canonical: a, dups: []string{a}},
			},
		},
		{
			name:  "rank tie: shortest URL wins even if larger",
			pages: corpus(pg(lg, "same text"), pg(sh, "same text")),
			want: map[string]want{
				sh: {canonical: sh, dups: []string{lg}},
				lg: {canonical: sh, dups: []string{sh}},
			},
		},
		{
			name:  "rank beats length",
			pages: corpus(pg(lg, "same"), pg(sh, "same"), pg(x, "other", ln(lg, "to long"))),
			want: map[string]want{
				lg: {canonical: lg, dups: []string{sh}, rank: 1, inbound: 1, inlinks: []Inlink{{x, lg, "to long", []string{"to long"}}}},
				sh: {canonical: lg, dups: []string{lg}, rank: 0, inbound: 1, inlinks: []Inlink{{x, lg, "to long", []string{"to long"}}}},
				x:  {canonical: x},
			},
		},
		{
			name: "source linking to two members counts once",
			pages: corpus(pg(a, "T"), pg(b, "T"),
				pg(x, "x", ln(a, "first"), ln(b, "second")),
				pg(y, "y", ln(b, ""))),
			want: map[string]want{
				a: {canonical: b, dups: []string{b}, rank: 1, inbound: 2,
					inlinks: []Inlink{{x, a, "first", []string{"first"}}, {x, b, "second", []string{"second"}}, {y, b, "", nil}}},
				b: {canonical: b, dups: []string{a}, rank: 2, inbound: 2,
					inlinks: []Inlink{{x, a, "first", []string{"first"}}, {x, b, "second", []string{"second"}}, {y, b, "", nil}}},
				x: {canonical: x},
				y: {canonical: y},
			},
		},
		{
			name:  "source inside the cluster is no inlink but counts for rank",
			pages: corpus(pg(a, "T", ln(b, "sibling")), pg(b, "T"), pg(x, "x", ln(a, "ext"))),
			want: map[string]want{
				a: {canonical: a, dups: []string{b}, rank: 1, inbound: 1, inlinks: []Inlink{{x, a, "ext", []string{"ext"}}}},
				b: {canonical: a, dups: []string{a}, rank: 1, inbound: 1, inlinks: []Inlink{{x, a, "ext", []string{"ext"}}}},
				x: {canonical: x},
			},
		},
		{
			name: "dangling link and self link",
			pages: corpus(
				pg(a, "a", ln("http://gone.example/", "gone"), ln(a, "me"), ln(b, "bee")),
				pg(b, "b")),
			want: map[string]want{
				a: {canonical: a},
				b: {canonical: b, rank: 1, inbound: 1, inlinks: []Inlink{{a, b, "bee", []string{"bee"}}}},
			},
		},
		{
			name: "empty-text pages are never duplicates",
			pages: corpus(pg("http://e1.example/", "", ln("http://e2.example/", "")),
				pg("http://e2.example/", "")),
			want: map[string]want{
				"http://e1.example/": {canonical: "http://e1.example/"},
				"http://e2.example/": {canonical: "http://e2.example/", rank: 1, inbound: 1,
					inlinks: []Inlink{{"http://e1.example/", "http://e2.example/", "", nil}}},
			},
		},
		{
			name: "three members, two top-ranked: shorter wins",
			pages: corpus(pg("http://a.example/x", "T"), pg("http://bb.example/x", "T"), pg("http://c.example/x", "T"),
				pg("http://p1.example/", "p1", ln("http://c.example/x", "c1"), ln("http://bb.example/x", "b1")),
				pg("http://p2.example/", "p2", ln("http://bb.example/x", "b2"), ln("http://c.example/x", "c2"), ln("http://a.example/x", "a2"))),
			want: func() map[string]want {
				in := []Inlink{
					{"http://p1.example/", "http://bb.example/x", "b1", []string{"b1"}},
					{"http://p1.example/", "http://c.example/x", "c1", []string{"c1"}},
					{"http://p2.example/", "http://a.example/x", "a2", []string{"a2"}},
					{"http://p2.example/", "http://bb.example/x", "b2", []string{"b2"}},
					{"http://p2.example/", "http://c.example/x", "c2", []string{"c2"}},
				}
				c := "http://c.example/x"
				return map[string]want{
					"http://a.example/x":  {canonical: c, dups: []string{"http://bb.example/x", c}, rank: 1, inbound: 2, inlinks: in},
					"http://bb.example/x": {canonical: c, dups: []string{"http://a.example/x", c}, rank: 2, inbound: 2, inlinks: in},
					c:                     {canonical: c, dups: []string{"http://a.example/x", "http://bb.example/x"}, rank: 2, inbound: 2, inlinks: in},
					"http://p1.example/":  {canonical: "http://p1.example/"},
					"http://p2.example/":  {canonical: "http://p2.example/"},
				}
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ix := Compute(tt.pages)
			if ix.Len() != len(tt.want) {
				t.Errorf("Len = %d, want %d", ix.Len(), len(tt.want))
			}
			for url, w := range tt.want {
				p, ok := ix.Page(url)
				if !ok {
					t.Errorf("%s: not in index", url)
					continue
				}
				got := want{p.Canonical, p.Duplicates, p.Rank, p.InboundCount, p.Inlinks}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("%s:\n got %+v\nwant %+v", url, got, w)
				}
				src := tt.pages[url]
				if p.URL != url || p.Title != src.Title || !slices.Equal(p.Outlinks, src.Links) {
					t.Errorf("%s: URL/Title/Outlinks = %q %q %v", url, p.URL, p.Title, p.Outlinks)
				}
			}
			if _, ok := ix.Page("http://gone.example/"); ok {
				t.Error("dangling target is in the index")
			}
		})
	}
}

// searchCorpus: C1 and D are duplicates ("Go is fun"). Inbound counts by
// hand: C1 <- C3 (1; D is in C1's cluster), C2 <- C3, C4 (2), C3 <- D (1),
// C4 (0). D is not canonical: its rank (1, from C1) ties C1's, and its
// URL is longer.
func searchCorpus() map[string]*extract.Page {
	const c1, c2, c3, c4, d = "http://c1.example/", "http://c2.example/", "http://c3.example/", "http://c4.example/", "http://dup.example/c1"
	return corpus(
		pg(c1, "Go is fun", ln(d, "my mirror")),
		pg(c2, "go programming, fun!"),
		pg(c3, "Rust is fun", ln(c1, "go"), ln(c2, "more go")),
		pg(c4, "fun FUN", ln(c2, "")),
		pg(d, "Go is fun", ln(c3, "rust")),
	)
}

func urls(rs []Result) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.URL)
	}
	return out
}

func TestSearch(t *testing.T) {
	ix := Compute(searchCorpus())
	const c1, c2, c3, c4 = "http://c1.example/", "http://c2.example/", "http://c3.example/", "http://c4.example/"
	tests := []struct {
		query string
		limit int
		total int
		want  []string
	}{
		// c4 says "fun" twice in two words: more about it than the
		// others, whose inbound links (the prior) only order c2 before
		// c1 and c3.
		{"fun", 10, 4, []string{c4, c2, c1, c3}},
		{"FUN!", 2, 4, []string{c4, c2}},
		{"fun", 0, 4, nil},
		// c1 and c2 hold both words in their texts and "go" in their
		// anchor text; c1's anchor text is shorter.
		{"go fun", 10, 2, []string{c1, c2}},
		// Only in c2's anchor text ("more go", from c3).
		{"more", 10, 1, []string{c2}},
		{"is", 10, 2, []string{c1, c3}},
		{"go rust", 10, 0, nil},
		{"absent", 10, 0, nil},
		{"", 10, 0, nil},
		{"  ,;! ", 10, 0, nil},
	}
	for _, tt := range tests {
		total, res := ix.Search(tt.query, tt.limit)
		if total != tt.total || !slices.Equal(urls(res), tt.want) {
			t.Errorf("Search(%q, %d) = %d %v, want %d %v", tt.query, tt.limit, total, urls(res), tt.total, tt.want)
		}
	}
	// By hand: 4 canonicals with words (c1, c2, c3, c4), 11 words, all
	// with "fun"; c4 has it twice in 2 words, none in its title, URL or
	// anchor text, rank 0 (no prior); a single word is not reranked.
	idf := math.Log(1 + (4-4+0.5)/(4+0.5))
	tf := 2 / (1 - 0.75 + 0.75*2/(11.0/4))
	wantC4 := idf * tf * 2.2 / (tf + 1.2)
	if _, res := ix.SearchPage("fun", 0, 1); len(res) != 1 || res[0].URL != c4 || math.Abs(res[0].Score-wantC4) > 1e-12 {
		t.Errorf("SearchPage(fun, 0, 1) = %+v, want %s scoring %v", res, c4, wantC4)
	}
	// c2: "fun" once in 3 words, rank 2: the prior multiplies by
	// 1 + 0.1·ln(3)/ln(1001).
	tf = 1 / (1 - 0.75 + 0.75*3/(11.0/4))
	wantC2 := idf * tf * 2.2 / (tf + 1.2) * (1 + 0.1*math.Log(3)/math.Log(1001))
	if _, res := ix.SearchPage("fun", 1, 1); len(res) != 1 || res[0].URL != c2 || math.Abs(res[0].Score-wantC2) > 1e-12 {
		t.Errorf("SearchPage(fun, 1, 1) = %+v, want %s scoring %v", res, c2, wantC2)
	}
	_, res := ix.Search("rust", 1)
	if len(res) != 1 || res[0].Score <= 0 {
		t.Fatalf("Search(rust) = %+v", res)
	}
	res[0].Score = 0
	if want := (Result{URL: c3, Title: "T " + c3, InboundCount: 1, TextBytes: int64(len("Rust is fun"))}); res[0] != want {
		t.Errorf("Search(rust) = %+v, want %+v", res, want)
	}
}

func TestTop(t *testing.T) {
	ix := Compute(searchCorpus())
	const c1, c2, c3, c4 = "http://c1.example/", "http://c2.example/", "http://c3.example/", "http://c4.example/"
	for _, tt := range []struct {
		n    int
		want []string
	}{
		{10, []string{c2, c1, c3, c4}},
		{2, []string{c2, c1}},
		{0, nil},
		{-1, nil},
	} {
		if got := urls(ix.Top(tt.n)); !slices.Equal(got, tt.want) {
			t.Errorf("Top(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
	if top := ix.Top(1); top[0].InboundCount != 2 || top[0].Title != "T "+c2 {
		t.Errorf("Top(1) = %+v", top)
	}
}

// longest ranks longer URLs higher, to show the ranker is pluggable.
type longest struct{}

func (longest) Rank(pages map[string]*extract.Page) map[string]int64 {
	r := map[string]int64{}
	for u := range pages {
		r[u] = int64(len(u))
	}
	return r
}

func TestComputeWithRanker(t *testing.T) {
	ix := ComputeWith(searchCorpus(), longest{})
	p, _ := ix.Page("http://c1.example/")
	if p.Canonical != "http://dup.example/c1" || p.Rank != int64(len("http://c1.example/")) || p.InboundCount != 1 {
		t.Errorf("c1 = %+v", p)
	}
	if _, res := ix.Search("go is fun", 10); !slices.Equal(urls(res), []string{"http://dup.example/c1"}) {
		t.Errorf("search = %v", urls(res))
	}
}

// TestFromHTML runs the semantics through extract.Parse: a self link is
// dropped by the parser, and script text is not searchable.
func TestFromHTML(t *testing.T) {
	docs := map[string]string{
		"http://h.example/":  `<title>Home</title><a href="/">self</a><a href="HTTP://H.example:80/x#f">x</a><script>secret()</script>`,
		"http://h.example/x": `<title>X</title><a href="/"><img src="i.png"></a>`,
	}
	pages := map[string]*extract.Page{}
	for u, body := range docs {
		p, err := extract.Parse(u, strings.NewReader(body), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		pages[p.URL] = p
	}
	ix := Compute(pages)
	home, _ := ix.Page("http://h.example/")
	x, _ := ix.Page("http://h.example/x")
	if home.Rank != 1 || home.InboundCount != 1 || !reflect.DeepEqual(home.Inlinks, []Inlink{{"http://h.example/x", "http://h.example/", "", nil}}) {
		t.Errorf("home = %+v", home)
	}
	if x.Rank != 1 || !reflect.DeepEqual(x.Inlinks, []Inlink{{"http://h.example/", "http://h.example/x", "x", []string{"x"}}}) {
		t.Errorf("x = %+v", x)
	}
	if n, _ := ix.Search("secret", 10); n != 0 {
		t.Errorf("script text is searchable")
	}
}

func TestResultTitleIsCut(t *testing.T) {
	as := func(n int) string { return strings.Repeat("a", n) }
	for _, tt := range []struct{ name, title, want string }{
		{"short", "Short title", "Short title"},
		{"exactly the limit", as(ResultTitleBytes), as(ResultTitleBytes)},
		{"one byte over", as(ResultTitleBytes + 1), as(ResultTitleBytes)},
		{"two-byte character across the limit", as(ResultTitleBytes-1) + "é", as(ResultTitleBytes - 1)},
		{"two-byte character ending at the limit", as(ResultTitleBytes-2) + "éx", as(ResultTitleBytes-2) + "é"},
		{"four-byte character across the limit", as(ResultTitleBytes-2) + "😀", as(ResultTitleBytes - 2)},
		{"no character starts before the limit", strings.Repeat("\x80", ResultTitleBytes+10), ""},
	} {
		p := pg(a, "text")
		p.Title = tt.title
		ix := Compute(corpus(p))
		top := ix.Top(1)
		_, res := ix.Search("text", 1)
		page, _ := ix.Page(a)
		if top[0].Title != tt.want || res[0].Title != tt.want {
			t.Errorf("%s: result titles %q and %q, want %q", tt.name, top[0].Title, res[0].Title, tt.want)
		}
		if page.Title != tt.title {
			t.Errorf("%s: page title %q, want the whole title %q", tt.name, page.Title, tt.title)
		}
	}
}
