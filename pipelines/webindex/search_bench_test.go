package webindex_test

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/query"
)

// BenchmarkSearchLatency measures search latency with BM25 scoring on a
// generated corpus of 10k pages, bulk loaded: each sub-benchmark runs a
// class of queries round robin (a first page of 10 results with snippets)
// and reports the 50th and 99th percentile of their latency. The classes
// are the terms with the most matches (every match is scored), terms in
// about 1% of the pages, rare terms, and pairs of a frequent and a medium
// term.
func BenchmarkSearchLatency(b *testing.B) {
	p := parseCorpus(b, corpusDocs(4, 10000))
	pages := make(map[string]*extract.Page, len(p.pages))
	df := map[string]int{}
	for _, pg := range p.pages {
		pages[pg.URL] = pg
		for _, t := range extract.Terms(pg.Text) {
			df[t]++
		}
	}
	type term struct {
		t  string
		df int
	}
	var terms []term
	for t, n := range df {
		terms = append(terms, term{t, n})
	}
	slices.SortFunc(terms, func(a, b term) int { return cmp.Or(cmp.Compare(b.df, a.df), cmp.Compare(a.t, b.t)) })
	near := func(n int) []string { // the 5 terms matching about n pages
		i, _ := slices.BinarySearchFunc(terms, n, func(a term, n int) int { return cmp.Compare(n, a.df) })
		i = min(i, len(terms)-5)
		var out []string
		for _, t := range terms[i : i+5] {
			out = append(out, t.t)
		}
		return out
	}
	var frequent []string
	for _, t := range terms[:5] {
		frequent = append(frequent, t.t)
	}
	medium, rare := near(len(pages)/100), near(3)
	var pairs []string
	for i := range 5 {
		pairs = append(pairs, frequent[i]+" "+medium[i])
	}

	e, closeEnv := newBenchEnv(b, 5*time.Millisecond)
	defer closeEnv()
	if _, err := e.ix.BulkLoad(context.Background(), e.db, pages, nil); err != nil {
		b.Fatal(err)
	}
	for _, class := range []struct {
		name    string
		queries []string
	}{{"frequent", frequent}, {"medium", medium}, {"rare", rare}, {"pairs", pairs}} {
		b.Run(class.name, func(b *testing.B) {
			var lat []time.Duration
			matches := 0
			i := 0
			for b.Loop() {
				q := class.queries[i%len(class.queries)]
				i++
				began := time.Now()
				res, err := e.ix.SearchPage(context.Background(), e.db, query.SearchRequest{Query: q, Limit: 10, Snippets: true})
				lat = append(lat, time.Since(began))
				if err != nil {
					b.Fatal(err)
				}
				if res.Total == 0 {
					b.Fatalf("%q matches nothing", q)
				}
				matches += res.Total
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64(matches)/float64(len(lat)), "matches/query")
		})
	}
}
