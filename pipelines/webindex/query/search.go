package query

import (
	"context"
	"fmt"
	"iter"
	"slices"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
	"github.com/trickle-dev/trickle/pipelines/webindex/scoring"
)

// MaxSearchDepth bounds how deep into a search's ordering a page of
// results may reach (offset + limit): Search keeps that many results in
// memory while the matches stream by.
const MaxSearchDepth = 10000

// SearchRequest asks for one page of a search's results.
type SearchRequest struct {
	// Query is the text searched for (extract.ParseQuery): a result
	// holds each of its words in its text or its anchor text; it may have
	// at most MaxQueryTerms distinct words and identifiers.
	Query string
	// Offset is the number of results skipped; Limit how many are
	// returned (at most Options.MaxResults). Offset + Limit must not
	// exceed MaxSearchDepth.
	Offset, Limit int
	// Snippets asks for each result's Snippet: a passage of its text with
	// the query terms marked, made from its excerpt (see ExcerptBytes),
	// which costs a read of up to ExcerptBytes per result.
	Snippets bool
	// AsOf, if not 0, searches the index as it was at that timestamp
	// (framework.TimestampAt, ParseAsOf), within the history garbage
	// collection keeps (see framework.DB.ViewAt). Default: 0, now.
	AsOf uint64
}

// ResultPage is one page of an ordered list of canonicals.
type ResultPage struct {
	// Total is the number of entries in the whole list. For a top list it
	// is the folded cluster count of the corpus statistics, which lags a
	// little behind the list while the observers catch up.
	Total int `json:"total"`
	// Offset is the position of the first of Results in the list.
	Offset  int      `json:"offset"`
	Results []Result `json:"results"`
	// AsOf is the past snapshot the list was read in, when one was asked
	// for (SearchRequest.AsOf).
	AsOf *Snapshot `json:"as_of,omitempty"`
}

// Search returns the first limit results of query; see SearchPage.
func (ix *Engine) Search(ctx context.Context, db *framework.DB, query string, limit int) (total int, results []Result, err error) {
	p, err := ix.SearchPage(ctx, db, SearchRequest{Query: query, Limit: limit})
	if err != nil {
		return 0, []Result{}, err
	}
	return p.Total, p.Results, nil
}

// SearchPage returns the canonicals holding every word of the query in
// their text or the anchor text of their inlinks, ordered by score (see
// Scoring and package scoring) descending, then inbound count descending,
// then URL: Total counts them all, Results holds those from Offset on, at
// most Limit (capped at Options.MaxResults). A query of more than
// MaxQueryTerms distinct words and identifiers, or a page beyond
// MaxSearchDepth, is refused with ErrBadQuery.
//
// Search reads every match's postings, cluster state and canonical's
// summary (to score and order them), each query term's postings once more
// to count them (its document frequency), the corpus statistics and, for
// a query of several words, the excerpts of the Scoring.RerankDepth best
// matches (to rerank them by how close together the words are). It holds
// one posting per query term and the Offset + Limit (at least
// RerankDepth) best results in memory, however many pages match.
func (ix *Engine) SearchPage(ctx context.Context, db *framework.DB, req SearchRequest) (*ResultPage, error) {
	pq := extract.ParseQuery(req.Query)
	q := scoring.NewQuery(pq)
	offset, limit := ix.window(req.Offset, req.Limit)
	page := &ResultPage{Offset: offset, Results: []Result{}}
	switch {
	case len(q.Terms) > MaxQueryTerms:
		return page, fmt.Errorf("%w: %d distinct terms, at most %d", ErrBadQuery, len(q.Terms), MaxQueryTerms)
	case offset+limit > MaxSearchDepth:
		return page, fmt.Errorf("%w: results %d to %d asked for, at most %d are ranked", ErrBadQuery, offset, offset+limit, MaxSearchDepth)
	case len(q.Words) == 0:
		return page, nil
	}
	sc := ix.opts.Scoring.Effective()
	page.AsOf = snapshotAt(req.AsOf)
	err := viewAt(ctx, db, req.AsOf, func(ctx context.Context, tx *framework.Txn) error {
		corp, err := corpusFor(ctx, tx, q)
		if err != nil {
			return err
		}
		keep := offset + limit
		if sc.Reranks(q) {
			keep = max(keep, sc.RerankDepth)
		}
		best := &bestResults{limit: keep, order: scoreOrder}
		if page.Total, err = ix.scoreMatches(ctx, tx, q, &sc, corp, best); err != nil {
			return err
		}
		results := best.sorted()
		excerpts, err := rerank(ctx, tx, q, &sc, results)
		if err != nil {
			return err
		}
		page.Results = results[min(offset, len(results)):min(offset+limit, len(results))]
		if !req.Snippets {
			return nil
		}
		return addSnippets(ctx, tx, q, page.Results, excerpts)
	})
	return page, err
}

// corpusFor is the statistics q is scored with: the corpus's, and each
// query term's document frequency, counted from its postings.
func corpusFor(ctx context.Context, tx *framework.Txn, q *scoring.Query) (*scoring.Corpus, error) {
	c, err := schema.ReadCorpus(ctx, tx)
	if err != nil {
		return nil, err
	}
	dfs := make([]int64, len(q.Terms))
	n := c.Docs
	for i, t := range q.Terms {
		if dfs[i], err = schema.CountPostings(ctx, tx, t); err != nil {
			return nil, err
		}
		n = max(n, dfs[i]) // statistics not yet folded, or an old store's
	}
	return scoring.NewCorpus(n, c.Words, c.Anchors, dfs), nil
}

// scoreMatches scores every page matching q into best and returns how
// many there are. Matches are scored in batches, their states and
// summaries read with one GetRows each: a frequent term has thousands.
func (ix *Engine) scoreMatches(ctx context.Context, tx *framework.Txn, q *scoring.Query, sc *scoring.Params, corp *scoring.Corpus, best *bestResults) (int, error) {
	total := 0
	batch := make([]match, 0, scoreBatch)
	flush := func() error {
		defer func() { batch = batch[:0] }()
		states, err := readStates(ctx, tx, batch)
		if err != nil {
			return err
		}
		sums, err := readSummaries(ctx, tx, states)
		if err != nil {
			return err
		}
		for i, m := range batch {
			s := states[i]
			if s == nil {
				continue
			}
			total++
			sum := sums[s.Canonical]
			d := scoring.Doc{Body: m.body, Anchor: m.anchor, BodyLen: s.Words, AnchorLen: s.AnchorLen, Title: sum.Title, URL: s.Canonical, Prior: ix.prior(s.Rank)}
			best.add(Result{URL: s.Canonical, Title: sum.Title, InboundCount: s.Inbound, TextBytes: sum.TextBytes, Score: sc.Base(q, corp, &d)})
		}
		return nil
	}
	for m, err := range matching(ctx, tx, q) {
		if err != nil {
			return 0, err
		}
		if batch = append(batch, m); len(batch) == scoreBatch {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return 0, err
	}
	return total, nil
}

// rerank rescores the RerankDepth best of results (sorted) by how close
// together q's words are in their excerpts, when the query reranks, and
// sorts them again. It returns the excerpts it read, for the snippets.
func rerank(ctx context.Context, tx *framework.Txn, q *scoring.Query, sc *scoring.Params, results []Result) (map[string]string, error) {
	excerpts := map[string]string{}
	if !sc.Reranks(q) {
		return excerpts, nil
	}
	for i := range results[:min(len(results), sc.RerankDepth)] {
		text, err := schema.ReadExcerpt(ctx, tx, results[i].URL)
		if err != nil {
			return nil, err
		}
		excerpts[results[i].URL] = text
		results[i].Score = sc.Final(q, results[i].Score, results[i].Title, text)
	}
	slices.SortFunc(results, scoreOrder)
	return excerpts, nil
}

// addSnippets sets each result's snippet from its excerpt: the one
// rerank read, else read now.
func addSnippets(ctx context.Context, tx *framework.Txn, q *scoring.Query, results []Result, excerpts map[string]string) error {
	urls, texts := make([]string, len(results)), make([]string, len(results))
	for i := range results {
		text, ok := excerpts[results[i].URL]
		if !ok {
			var err error
			if text, err = schema.ReadExcerpt(ctx, tx, results[i].URL); err != nil {
				return err
			}
		}
		urls[i], texts[i] = results[i].URL, text
	}
	for i, s := range makeSnippets(urls, texts, q.Words) {
		results[i].Snippet = s
	}
	return nil
}

// prior is the rank the scoring prior of a canonical with rank is
// computed from: its PageRank scaled to average 1 with PageRankRanker,
// else the rank itself (an inlink count by default).
func (ix *Engine) prior(rank int64) float64 {
	if _, ok := ix.opts.Ranker.(ranking.PageRankRanker); ok {
		return float64(rank) / schema.PageRankScale
	}
	return float64(rank)
}

// scoreBatch is how many matches a search reads the states and summaries
// of at once.
const scoreBatch = 256

// readStates reads the states of the matches' clusters (nil: none).
func readStates(ctx context.Context, tx *framework.Txn, ms []match) ([]*schema.State, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	rows := make([][]byte, len(ms))
	for i, m := range ms {
		rows[i] = []byte(m.key)
	}
	got, err := tx.GetRows(ctx, schema.ClustersTable, rows, []framework.Column{schema.ClusterState})
	if err != nil {
		return nil, err
	}
	out := make([]*schema.State, len(ms))
	for i, m := range ms {
		b, ok := got[m.key][schema.ClusterState]
		if !ok {
			continue
		}
		if out[i], err = schema.DecodeState(b); err != nil {
			return nil, fmt.Errorf("cluster %s: %w", m.key, err)
		}
	}
	return out, nil
}

// readSummaries reads the summaries of the states' canonicals, as
// ReadSummary does, keyed by URL.
func readSummaries(ctx context.Context, tx *framework.Txn, states []*schema.State) (map[string]schema.Summary, error) {
	var rows [][]byte
	for _, s := range states {
		if s != nil {
			rows = append(rows, []byte(s.Canonical))
		}
	}
	out := make(map[string]schema.Summary, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	got, err := tx.GetRows(ctx, schema.PagesTable, rows, []framework.Column{schema.SummaryCol})
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		u := string(r)
		b, ok := got[u][schema.SummaryCol]
		if !ok { // deleted, or stored before summaries
			if out[u], err = schema.ReadSummary(ctx, tx, u); err != nil {
				return nil, err
			}
			continue
		}
		if out[u], err = schema.DecodeSummary(b); err != nil {
			return nil, fmt.Errorf("%s %s: %w", u, schema.SummaryCol, err)
		}
	}
	return out, nil
}

// match is a cluster holding every word of a query, with its term
// frequencies in its text and anchor text (in query-term order; 0 for an
// identifier it does not hold).
type match struct {
	key          string
	body, anchor []int64
}

// matching yields, in key order, the clusters posted under every word of
// q (in their text or anchor text), with their postings under q's
// identifiers too: a merge of the terms' posting streams, which are in
// key order, holding one open stream and one posting per term.
func matching(ctx context.Context, tx *framework.Txn, q *scoring.Query) iter.Seq2[match, error] {
	return func(yield func(match, error) bool) {
		terms := q.Terms
		nexts := make([]func() (schema.Posting, error, bool), len(terms))
		for i, t := range terms {
			next, stop := iter.Pull2(schema.TermPostings(ctx, tx, t))
			defer stop()
			nexts[i] = next
		}
		cur := make([]schema.Posting, len(terms))
		done := make([]bool, len(terms)) // an identifier's stream ended
		failed := false
		// seek moves term i to its first cluster at or after from; false
		// when it has none (or on error, which it yields).
		seek := func(i int, from string) bool {
			for {
				p, err, ok := nexts[i]()
				switch {
				case !ok:
					return false
				case err != nil:
					failed = true
					yield(match{}, err)
					return false
				case p.Key >= from:
					cur[i] = p
					return true
				}
			}
		}
		for i := range terms {
			if !seek(i, "") {
				if failed || q.Word[i] {
					return
				}
				done[i] = true
			}
		}
		for {
			hi := ""
			for i := range cur {
				if q.Word[i] && cur[i].Key > hi {
					hi = cur[i].Key
				}
			}
			agree := true
			for i := range cur {
				if !q.Word[i] || cur[i].Key >= hi {
					continue
				}
				agree = false
				if !seek(i, hi) {
					return
				}
			}
			if !agree {
				continue
			}
			m := match{key: hi, body: make([]int64, len(terms)), anchor: make([]int64, len(terms))}
			for i := range terms {
				if !q.Word[i] && !done[i] && cur[i].Key < hi && !seek(i, hi) {
					if failed {
						return
					}
					done[i] = true
				}
				if !done[i] && cur[i].Key == hi {
					m.body[i], m.anchor[i] = cur[i].Body, cur[i].Anchor
				}
			}
			if !yield(m, nil) {
				return
			}
			for i := range cur {
				if q.Word[i] && !seek(i, hi+"\x00") { // the next key after hi
					return
				}
			}
		}
	}
}
