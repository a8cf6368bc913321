package bulk

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/batchpipe"
	"github.com/trickle-dev/trickle/internal/extsort"
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// bulkMember is a member of a cluster being ranked, with its inlinks.
type bulkMember struct {
	url, title string
	id         uint32
	inlinks    []bulkInlink
}

// bulkInlink is a link into a member: its source and the distinct terms
// of its anchors.
type bulkInlink struct {
	source string
	terms  []string
}

// bulkCluster is one duplicate cluster of a bulk computation, with what
// ranking it needs: its members (in URL order), its text, and that
// text's term counts.
type bulkCluster struct {
	key     string
	members []bulkMember
	text    string
	counts  map[string]int64
	words   int64
}

// clusterOut are the sorters the clusters' ranking fills for the tables
// passed after theirs: the canonical rows by page ordinal, the postings
// by term, and the cells of the sites and top lists by row.
type clusterOut struct {
	rows, postings, sites, top *extsort.Sorter
}

// clusterBatch is how many clusters' term counts are counted at a time,
// on every core.
const clusterBatch = 256

// rankClusters reads the members (and their inlinks) by cluster and
// derives each cluster as the cluster observer would: its canonical,
// inbound count and members' ranks, its anchor terms and state. It passes
// the clusters table to set, in key order, and returns the sorters of
// what the other tables take from the clusters.
func (j *bulkJob) rankClusters(ctx context.Context, tx *framework.Txn, clusters *extsort.Sorter, set schema.SetFunc) (*clusterOut, error) {
	j.prog.start("ranking clusters", clusters.Len())
	out := &clusterOut{}
	for _, s := range []struct {
		to    **extsort.Sorter
		share int64
	}{{&out.rows, shareRows}, {&out.postings, sharePostings}, {&out.sites, shareLists}, {&out.top, shareLists}} {
		var err error
		if *s.to, err = j.sorter(s.share); err != nil {
			return nil, err
		}
	}
	// Reading the members, counting the terms of a batch of clusters on
	// every core and ranking the last overlap.
	produce := func(ctx context.Context, send func([]*bulkCluster) bool) error {
		batch := make([]*bulkCluster, 0, clusterBatch)
		var texts int
		var cur *bulkCluster
		it := clusters.Iter(ctx)
		defer it.Close()
		for it.Next() {
			r := it.Record()
			key, rest := splitKey(r.Key)
			if cur == nil || string(key) != cur.key {
				if cur != nil {
					if batch = append(batch, cur); len(batch) == clusterBatch || texts > 16<<20 {
						if !send(batch) {
							return ctx.Err()
						}
						batch, texts = make([]*bulkCluster, 0, clusterBatch), 0
					}
				}
				cur = &bulkCluster{key: string(key)}
			}
			url, tag := rest[:len(rest)-2], rest[len(rest)-1]
			if n := len(cur.members); n == 0 || cur.members[n-1].url != string(url) {
				cur.members = append(cur.members, bulkMember{url: string(url)})
			}
			m := &cur.members[len(cur.members)-1]
			switch tag {
			case clusterMember:
				m.id = binary.BigEndian.Uint32(r.Value)
				d := schema.NewDecoder(r.Value[4:])
				m.title = d.String()
				if text := d.String(); len(cur.members) == 1 {
					cur.text = text // the first member's, as the observer takes it
					texts += len(text)
				}
				if err := d.Err(); err != nil {
					return err
				}
			case clusterInlinks:
				d := schema.NewDecoder(r.Value)
				m.inlinks = make([]bulkInlink, d.Uvarint())
				for i := range m.inlinks {
					m.inlinks[i] = bulkInlink{source: d.String(), terms: d.Strings()}
				}
				if err := d.Err(); err != nil {
					return err
				}
			default:
				return fmt.Errorf("%w: bulk load: cluster record of kind %q", schema.ErrCorrupt, tag)
			}
			j.prog.add(1)
		}
		if err := it.Err(); err != nil {
			return err
		}
		if cur != nil {
			batch = append(batch, cur)
		}
		if len(batch) > 0 && !send(batch) {
			return ctx.Err()
		}
		return nil
	}
	work := func(batch []*bulkCluster) {
		parallel(len(batch), func(i int) {
			c := batch[i]
			c.counts, c.words = schema.TermCounts(c.text)
		})
	}
	finish := func(batch []*bulkCluster) error {
		for _, c := range batch {
			if err := j.rankCluster(ctx, tx, c, out, set); err != nil {
				return err
			}
		}
		return nil
	}
	if err := batchpipe.Run(ctx, produce, work, finish); err != nil {
		return nil, err
	}
	for _, s := range []*extsort.Sorter{out.rows, out.postings, out.sites, out.top} {
		if err := s.Finish(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rankCluster derives cluster c, passes its rows of the clusters table to
// set and adds what the other tables take from it to out. Its ordinal is
// the number of clusters ranked before it.
func (j *bulkJob) rankCluster(ctx context.Context, tx *framework.Txn, c *bulkCluster, out *clusterOut, set schema.SetFunc) error {
	ordinal := uint32(j.clusters)
	j.clusters++
	j.keys.add(c.key)
	canonical, best, ranks, err := j.chooseCanonical(ctx, tx, c)
	if err != nil {
		return err
	}
	inbound, anchors := clusterAnchors(c)
	var rowKey []byte
	for i, m := range c.members {
		row := schema.EncodeRow(schema.CanonicalRow{Title: schema.ListTitle(m.title), Canonical: canonical, InboundCount: inbound, Rank: ranks[i]})
		if err := out.rows.Add(appendID(rowKey[:0], m.id), row); err != nil {
			return err
		}
	}
	st := &schema.State{Canonical: canonical, Inbound: inbound, Rank: best, Words: c.words}
	terms := schema.SortedTerms(c.counts)
	var posted map[string]int64
	if len(terms) > 0 {
		j.docs++
		j.words += c.words
		if len(anchors) > 0 {
			posted = schema.Postable(anchors)
			st.AnchorLen = schema.AnchorSum(posted)
		}
	}
	if err := out.addPostings(ordinal, terms, c.counts, posted); err != nil {
		return err
	}
	var val []byte
	err = schema.SetListEntries(schema.Setter(func(table string, row []byte, col framework.Column, value []byte) error {
		to := out.sites
		if table == schema.TopTable {
			to = out.top
		}
		val = schema.AppendString(schema.AppendString(schema.AppendString(val[:0], col.Family), col.Qualifier), string(value))
		return to.Add(row, val)
	}), c.key, st)
	if err != nil {
		return err
	}
	return setClusterRow(c, terms, posted, st, set)
}

// chooseCanonical ranks c's members and returns the canonical (the best
// by rank, then URL), its rank and each member's.
func (j *bulkJob) chooseCanonical(ctx context.Context, tx *framework.Txn, c *bulkCluster) (canonical string, best int64, ranks []int64, err error) {
	ranks = make([]int64, len(c.members))
	_, byPageRank := j.cfg.Ranker.(ranking.PageRankRanker)
	for i, m := range c.members {
		var r int64
		if byPageRank && j.pr != nil {
			r = j.pr.rank(m.id)
		} else if r, err = j.cfg.Ranker.Rank(ctx, tx, m.url, int64(len(m.inlinks))); err != nil {
			return "", 0, nil, fmt.Errorf("webindex: ranking %s: %w", m.url, err)
		}
		ranks[i] = r
		if canonical == "" || ranking.Better(r, m.url, best, canonical) {
			best, canonical = r, m.url
		}
	}
	return canonical, best, ranks, nil
}

// clusterAnchors returns c's inbound count and anchor term counts: of a
// single page, its inlinks and their terms; of a cluster with duplicates,
// its distinct sources outside it, each source's terms counted once.
func clusterAnchors(c *bulkCluster) (inbound int64, anchors map[string]int64) {
	if len(c.members) == 1 {
		for _, l := range c.members[0].inlinks {
			for _, t := range l.terms {
				if anchors == nil {
					anchors = map[string]int64{}
				}
				anchors[t]++
			}
		}
		return int64(len(c.members[0].inlinks)), anchors
	}
	outside := map[string]map[string]bool{}
	for _, m := range c.members {
		for _, l := range m.inlinks {
			if _, inside := slices.BinarySearchFunc(c.members, l.source, func(m bulkMember, u string) int { return strings.Compare(m.url, u) }); inside {
				continue
			}
			terms := outside[l.source]
			if terms == nil {
				terms = map[string]bool{}
				outside[l.source] = terms
			}
			for _, t := range l.terms {
				terms[t] = true
			}
		}
	}
	anchors = map[string]int64{}
	for _, terms := range outside {
		for t := range terms {
			anchors[t]++
		}
	}
	return int64(len(outside)), anchors
}

// addPostings adds the cluster's postings, by term, to the postings run:
// a text posting per term of counts, an anchor posting per term of
// posted (anchor postings sort before text ones).
func (out *clusterOut) addPostings(ordinal uint32, terms []string, counts, posted map[string]int64) error {
	var key, val []byte
	post := func(term string, family byte, n int64) error {
		key = appendID(append(append(append(key[:0], term...), 0), family), ordinal)
		val = binary.AppendUvarint(val[:0], uint64(n))
		return out.postings.Add(key, val)
	}
	for _, t := range terms {
		if err := post(t, postingText, counts[t]); err != nil {
			return err
		}
	}
	for t, n := range posted {
		if err := post(t, postingAnchor, n); err != nil {
			return err
		}
	}
	return nil
}

// setClusterRow passes the cluster's own row: members, terms, anchor
// terms, state.
func setClusterRow(c *bulkCluster, terms []string, posted map[string]int64, st *schema.State, set schema.SetFunc) error {
	row := []byte(c.key)
	for _, m := range c.members {
		if err := set(schema.ClustersTable, row, framework.Column{Family: schema.MemberFamily, Qualifier: m.url}, nil); err != nil {
			return err
		}
	}
	if len(terms) > 0 {
		if err := set(schema.ClustersTable, row, schema.ClusterTerms, schema.EncodeTerms(terms)); err != nil {
			return err
		}
	}
	if len(posted) > 0 {
		if err := set(schema.ClustersTable, row, schema.ClusterAnchors, schema.EncodeTermCounts(posted)); err != nil {
			return err
		}
	}
	return set(schema.ClustersTable, row, schema.ClusterState, schema.EncodeState(st))
}

// The kinds of posting a term's sort keys name, in the order of their
// cells: anchor postings, then text postings.
const (
	postingAnchor byte = 0
	postingText   byte = 1
)
