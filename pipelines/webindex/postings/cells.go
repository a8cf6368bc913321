package postings

import (
	"bytes"
	"cmp"
	"slices"
	"strings"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"
)

// Posting is a cluster's posting under a term: its count (occurrences in
// the text, or anchor count).
type Posting struct {
	Cluster string
	Count   int64
}

// TitlePosting is the count of a term in the result title and URL path
// of a cluster's canonical.
type TitlePosting struct {
	Cluster    string
	Title, URL int64
}

// TitleTerms counts each term of a canonical's result title and URL path
// (scoring.URLTokens), as the score counts them: the title and URL
// shares of the cluster's contributions.
func TitleTerms(title, url string) map[string]Contribution {
	out := map[string]Contribution{}
	extract.Tokenize(title, func(t string, _ extract.TokenKind, _ int) bool {
		c := out[t]
		c.Title++
		out[t] = c
		return true
	})
	if path := scoring.URLTokens(url); path != "" {
		extract.Tokenize(path, func(t string, _ extract.TokenKind, _ int) bool {
			c := out[t]
			c.URL++
			out[t] = c
			return true
		})
	}
	return out
}

// Emit receives one cell of a term's layout, in TermsTable.
type Emit func(row []byte, col framework.Column, value []byte) error

// TermCells passes every cell of term in key order: its row (anchor
// postings, text postings, then its document frequency) and then its
// impact rows, each entry of each. body, anchor and title are sorted by
// cluster; shape gives the shape of each cluster they name. It is what
// the observers leave of the term once every cluster is posted, and what
// a bulk load writes.
func TermCells(term string, body, anchor []Posting, title []TitlePosting, shape func(cluster string) Shape, emit Emit) error {
	row := []byte(term)
	for _, p := range anchor {
		if err := emit(row, framework.Column{Family: AnchorFamily, Qualifier: p.Cluster}, EncodePosting(p.Count)); err != nil {
			return err
		}
	}
	for _, p := range body {
		if err := emit(row, framework.Column{Family: BodyFamily, Qualifier: p.Cluster}, EncodePosting(p.Count)); err != nil {
			return err
		}
	}
	type cell struct {
		row   []byte
		qual  string
		value []byte
	}
	var cells []cell
	var df int64
	i, j, k := 0, 0, 0
	for i < len(body) || j < len(anchor) || k < len(title) {
		key := ""
		for _, c := range []struct {
			ok bool
			k  string
		}{{i < len(body), at(body, i)}, {j < len(anchor), at(anchor, j)}, {k < len(title), atTitle(title, k)}} {
			if c.ok && (key == "" || c.k < key) {
				key = c.k
			}
		}
		var c Contribution
		if i < len(body) && body[i].Cluster == key {
			c.Body = body[i].Count
			i++
		}
		if j < len(anchor) && anchor[j].Cluster == key {
			c.Anchor = anchor[j].Count
			j++
		}
		if k < len(title) && title[k].Cluster == key {
			c.Title, c.URL = title[k].Title, title[k].URL
			k++
		}
		if c.Matches() {
			df++
		}
		if e, ok := MakeEntry(key, c, shape(key)); ok {
			cells = append(cells, cell{RunRow(term, e.Run), e.Qualifier(), e.Value()})
		}
	}
	if df > 0 {
		if err := emit(row, DFColumn, EncodeDF(df)); err != nil {
			return err
		}
	}
	slices.SortFunc(cells, func(a, b cell) int { return cmp.Or(bytes.Compare(a.row, b.row), strings.Compare(a.qual, b.qual)) })
	for _, c := range cells {
		if err := emit(c.row, framework.Column{Family: EntryFamily, Qualifier: c.qual}, c.value); err != nil {
			return err
		}
	}
	return nil
}

func at(ps []Posting, i int) string {
	if i < len(ps) {
		return ps[i].Cluster
	}
	return ""
}

func atTitle(ps []TitlePosting, i int) string {
	if i < len(ps) {
		return ps[i].Cluster
	}
	return ""
}
