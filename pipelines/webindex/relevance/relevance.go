// Package relevance measures how well a search finds the page a query is
// about: it runs a judged query set (each query with the URL of the page
// that answers it) against a search and reports hits@1, hits@3 and the mean
// reciprocal rank, query by query.
//
// A judged set is a text file (see ParseSet) naming the corpus it was made
// on — a Debian *-doc package, the directory of its HTML in the package,
// and the base URL its files are loaded under — and its judgments. The
// sets kept here (Sets) were written by reading the corpora's pages: each
// query is one a developer would type, and its page is the one that
// documents what the query names, not merely one that mentions it.
package relevance

import (
	"bufio"
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"slices"
	"strings"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// ErrBadSet is wrapped by the errors ParseSet returns for a malformed set.
var ErrBadSet = errors.New("relevance: bad judged set")

// Set is a judged query set on one corpus.
type Set struct {
	// Name names the set (its file's name without extension).
	Name string
	// Package is the Debian package holding the corpus; Root the
	// directory of its HTML pages inside the package; BaseURL the URL
	// the pages are loaded under (loader -base-url).
	Package, Root, BaseURL string
	// Judgments are the set's queries, in file order.
	Judgments []Judgment
}

// Judgment is one judged query.
type Judgment struct {
	Query string
	// Want holds the normalized URLs of the pages that answer the query:
	// usually one; several when the corpus has equivalent pages.
	Want []string
	// Line is the judgment's line in its file.
	Line int
}

// ParseSet reads a judged set named name. Blank lines and lines starting
// with "#" are comments. Directives come first, one per line:
//
//	package python3.11-doc
//	root usr/share/doc/python3.11/html
//	base-url https://docs.python.org/3.11/
//
// then one judgment per line: the query, a tab, and the page's path
// relative to the base URL (several paths, separated by spaces, when the
// corpus has equivalent pages). Errors name the line and what is wrong.
func ParseSet(name string, r io.Reader) (*Set, error) {
	s := &Set{Name: name}
	sc := bufio.NewScanner(r)
	line := 0
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s:%d: %s", ErrBadSet, name, line, fmt.Sprintf(format, args...))
	}
	var base *url.URL
	seen := map[string]int{}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		query, paths, judged := strings.Cut(sc.Text(), "\t")
		if !judged {
			key, value, _ := strings.Cut(text, " ")
			value = strings.TrimSpace(value)
			if len(s.Judgments) > 0 {
				return nil, bad("directive %q after the first judgment", key)
			}
			if value == "" {
				return nil, bad("%q needs a value (a judgment is a query, a tab, and a path)", key)
			}
			switch key {
			case "package":
				s.Package = value
			case "root":
				s.Root = value
			case "base-url":
				u, err := url.Parse(value)
				if err != nil || !u.IsAbs() || u.Host == "" || !strings.HasSuffix(u.Path, "/") {
					return nil, bad("base-url %q is not an absolute URL ending in /", value)
				}
				s.BaseURL, base = value, u
			default:
				return nil, bad("unknown directive %q (want package, root or base-url)", key)
			}
			continue
		}
		if base == nil {
			return nil, bad("a judgment before the base-url directive")
		}
		query = strings.TrimSpace(query)
		if len(extract.ParseQuery(query).Words) == 0 {
			return nil, bad("query %q has no words", query)
		}
		if first, dup := seen[query]; dup {
			return nil, bad("query %q is judged twice (first on line %d)", query, first)
		}
		seen[query] = line
		j := Judgment{Query: query, Line: line}
		for _, p := range strings.Fields(paths) {
			ref, err := url.Parse(p)
			if err != nil || ref.IsAbs() || strings.HasPrefix(p, "/") {
				return nil, bad("path %q is not relative to the base URL", p)
			}
			u, err := extract.Normalize(base.ResolveReference(ref).String())
			if err != nil {
				return nil, bad("path %q: %v", p, err)
			}
			j.Want = append(j.Want, u)
		}
		if len(j.Want) == 0 {
			return nil, bad("query %q has no expected path", query)
		}
		s.Judgments = append(s.Judgments, j)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("relevance: reading %s: %w", name, err)
	}
	switch {
	case s.Package == "" || s.Root == "" || s.BaseURL == "":
		return nil, fmt.Errorf("%w: %s: the package, root and base-url directives are all required", ErrBadSet, name)
	case len(s.Judgments) == 0:
		return nil, fmt.Errorf("%w: %s: no judgments", ErrBadSet, name)
	}
	return s, nil
}

//go:embed sets/*.judged
var setFS embed.FS

// Sets returns the names of the judged sets kept in this package.
func Sets() []string {
	entries, _ := fs.ReadDir(setFS, "sets")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".judged"))
	}
	return out
}

// LoadSet returns the judged set kept in this package under name.
func LoadSet(name string) (*Set, error) {
	f, err := setFS.Open("sets/" + name + ".judged")
	if err != nil {
		return nil, fmt.Errorf("relevance: no judged set %q (have %s)", name, strings.Join(Sets(), ", "))
	}
	defer f.Close()
	return ParseSet(name, f)
}

// Searcher runs a query and returns the URLs of its first limit results,
// best first.
type Searcher interface {
	Search(ctx context.Context, query string, limit int) ([]string, error)
}

// Depth is how many results of each query are read: a page found below
// it counts as not found (reciprocal rank 0).
const Depth = 10

// Outcome is how a search did on one judgment.
type Outcome struct {
	Judgment
	// Rank is the position (1 = first) of the first expected page among
	// the results, 0 if it is not among the first Depth.
	Rank int
	// Got are the first results' URLs (at most 3), for the report.
	Got []string
}

// Report is a search's figures on a judged set.
type Report struct {
	Set      string
	Outcomes []Outcome
	// HitsAt1 and HitsAt3 are the shares of queries whose expected page
	// is first, or among the first three; MRR is the mean of 1/Rank (0
	// when not found).
	HitsAt1, HitsAt3, MRR float64
}

// Evaluate runs every query of set through s and scores the results.
func Evaluate(ctx context.Context, s Searcher, set *Set) (*Report, error) {
	r := &Report{Set: set.Name}
	for _, j := range set.Judgments {
		got, err := s.Search(ctx, j.Query, Depth)
		if err != nil {
			return nil, fmt.Errorf("relevance: %s:%d: searching %q: %w", set.Name, j.Line, j.Query, err)
		}
		o := Outcome{Judgment: j, Got: got[:min(3, len(got))]}
		for i, u := range got[:min(Depth, len(got))] {
			if slices.Contains(j.Want, u) {
				o.Rank = i + 1
				break
			}
		}
		r.Outcomes = append(r.Outcomes, o)
		if o.Rank == 1 {
			r.HitsAt1++
		}
		if o.Rank >= 1 && o.Rank <= 3 {
			r.HitsAt3++
		}
		if o.Rank > 0 {
			r.MRR += 1 / float64(o.Rank)
		}
	}
	n := float64(len(r.Outcomes))
	r.HitsAt1, r.HitsAt3, r.MRR = r.HitsAt1/n, r.HitsAt3/n, r.MRR/n
	return r, nil
}

// Print writes the report: one line per query (with the first results of
// those not found first), then the figures.
func (r *Report) Print(w io.Writer, verbose bool) error {
	bw := bufio.NewWriter(w)
	for _, o := range r.Outcomes {
		rank := "-"
		if o.Rank > 0 {
			rank = fmt.Sprint(o.Rank)
		}
		fmt.Fprintf(bw, "%3s  %-40s %s\n", rank, o.Query, o.Want[0])
		if verbose && o.Rank != 1 {
			for i, g := range o.Got {
				fmt.Fprintf(bw, "       %d. %s\n", i+1, g)
			}
		}
	}
	fmt.Fprintf(bw, "%s: %d queries  hits@1 %.3f  hits@3 %.3f  MRR %.3f\n", r.Set, len(r.Outcomes), r.HitsAt1, r.HitsAt3, r.MRR)
	return bw.Flush()
}
