package relevance

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestKeptSetsParse(t *testing.T) {
	names := Sets()
	if len(names) < 2 {
		t.Fatalf("kept sets %v, want at least two", names)
	}
	for _, n := range names {
		s, err := LoadSet(n)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Judgments) < 30 {
			t.Errorf("%s: %d judgments, want at least 30", n, len(s.Judgments))
		}
	}
	if _, err := LoadSet("nonesuch"); err == nil || !strings.Contains(err.Error(), "python") {
		t.Errorf("LoadSet(nonesuch) = %v, want an error listing the kept sets", err)
	}
}

const header = "package p\nroot r\nbase-url https://x.example/docs/\n"

func TestParseSetErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct {
		text, want string
	}{
		{header + "q\tp.html\npackage late\n", "s:5: directive \"package\" after the first judgment"},
		{"package p\nroot r\nq\tp.html\n", "s:3: a judgment before the base-url directive"},
		{"base-url docs/\n", "s:1: base-url \"docs/\" is not an absolute URL ending in /"},
		{"colour blue\n", "s:1: unknown directive \"colour\""},
		{"package\n", "s:1: \"package\" needs a value"},
		{header + "::\tp.html\n", "s:4: query \"::\" has no words"},
		{header + "q\t\n", "s:4: query \"q\" has no expected path"},
		{header + "q\t/abs.html\n", "s:4: path \"/abs.html\" is not relative"},
		{header + "q\ta.html\nq\tb.html\n", "s:5: query \"q\" is judged twice (first on line 4)"},
		{header, "s: no judgments"},
		{"package p\nbase-url https://x.example/\nq\ta.html\n", "the package, root and base-url directives are all required"},
	} {
		_, err := ParseSet("s", strings.NewReader(tc.text))
		if !errors.Is(err, ErrBadSet) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSet(%q) = %v, want an error containing %q", tc.text, err, tc.want)
		}
	}
}

type fakeSearcher map[string][]string

func (f fakeSearcher) Search(_ context.Context, q string, limit int) ([]string, error) {
	if q == "broken" {
		return nil, errors.New("store down")
	}
	r := f[q]
	return r[:min(limit, len(r))], nil
}

func TestEvaluate(t *testing.T) {
	s, err := ParseSet("s", strings.NewReader(header+"# a comment\n\nfirst\ta.html\nthird\tc.html\nmissing\tm.html\neither\tx.html e.html\n"))
	if err != nil {
		t.Fatal(err)
	}
	const b = "https://x.example/docs/"
	r, err := Evaluate(context.Background(), fakeSearcher{
		"first":   {b + "a.html", b + "z.html"},
		"third":   {b + "y.html", b + "z.html", b + "c.html"},
		"missing": {b + "y.html"},
		"either":  {b + "q.html", b + "e.html"},
	}, s)
	if err != nil {
		t.Fatal(err)
	}
	ranks := []int{}
	for _, o := range r.Outcomes {
		ranks = append(ranks, o.Rank)
	}
	if want := []int{1, 3, 0, 2}; !equal(ranks, want) {
		t.Errorf("ranks %v, want %v", ranks, want)
	}
	if r.HitsAt1 != 0.25 || r.HitsAt3 != 0.75 || math.Abs(r.MRR-(1+1.0/3+0.5)/4) > 1e-12 {
		t.Errorf("figures %v %v %v", r.HitsAt1, r.HitsAt3, r.MRR)
	}
	var out strings.Builder
	if err := r.Print(&out, true); err != nil || !strings.Contains(out.String(), "hits@1 0.250  hits@3 0.750") {
		t.Errorf("report %q (%v)", out.String(), err)
	}
	s.Judgments = append(s.Judgments, Judgment{Query: "broken", Want: []string{b}, Line: 9})
	if _, err := Evaluate(context.Background(), fakeSearcher{}, s); err == nil || !strings.Contains(err.Error(), "s:9") {
		t.Errorf("a failing search: %v, want an error naming the set's line", err)
	}
}

func equal(a, b []int) bool { return slices.Equal(a, b) }
