package bulk

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/extsort"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// setPageRows passes the rows of the pages table in key order: those of
// the pages (their own cells, scanned: document, list cells, indexed
// copy, cluster; then their row of the canonical table and, with
// PageRank, their state) and of every link target, loaded or not (inlink
// cells, count and anchor term counts). It merges four streams in URL
// order: the pages' cells, the inlinks by target, the canonical rows and
// the outlinks by page ordinal.
func (j *bulkJob) setPageRows(ctx context.Context, sc *bulkScan, rows *extsort.Sorter, set schema.SetFunc) error {
	j.prog.start("writing pages", j.pages+sc.inlinks.Len())
	cells, err := openSeq(sc.cells)
	if err != nil {
		return err
	}
	defer cells.close()
	canon := rows.Iter(ctx)
	defer canon.Close()
	in := sc.inlinks.Iter(ctx)
	defer in.Close()
	inOK := in.Next()

	// The outlinks of each page, for its PageRank state, come by ordinal.
	var outs *outlinkStream
	if j.pr != nil {
		octx, cancel := context.WithCancel(ctx)
		defer cancel()
		outs = streamOutlinks(octx, sc)
	}

	var page []byte // the next page's cells
	var pageURL string
	var id uint32
	nextPage := func() bool {
		b, ok := cells.next()
		if ok {
			page = b
			d := schema.NewDecoder(b)
			pageURL = d.String()
			page = b[len(b)-d.Len():]
		}
		return ok
	}
	pageOK := nextPage()
	counts := map[string]int64{}
	var row []byte
	for pageOK || inOK {
		// The next row: the page's, or the next target's if before it.
		isPage := pageOK
		if inOK {
			target, _ := splitKey(in.Record().Key)
			if !pageOK || string(target) < pageURL {
				isPage = false
				row = append(row[:0], target...)
			}
		}
		if isPage {
			row = append(row[:0], pageURL...)
			if err := j.setPageCells(row, page, id, canon, outs.of, set); err != nil {
				return err
			}
			id++
			pageOK = nextPage()
			j.prog.add(1)
		}
		if inOK, err = j.setInlinks(row, in, inOK, counts, set); err != nil {
			return err
		}
	}
	for _, err := range []error{cells.err, in.Err(), canon.Err()} {
		if err != nil {
			return err
		}
	}
	if err := outs.finish(); err != nil {
		return err
	}
	return ctx.Err()
}

// setInlinks passes the inlink cells of target row, the records of in
// from its current one (if inOK) on whose target is row, then the row's
// inlink count and anchor term counts (counts is scratch). It reports
// whether in has a record left.
func (j *bulkJob) setInlinks(row []byte, in *extsort.Iterator, inOK bool, counts map[string]int64, set schema.SetFunc) (bool, error) {
	var n int64
	clear(counts)
	for ; inOK; inOK = in.Next() {
		r := in.Record()
		target, source := splitKey(r.Key)
		if string(target) != string(row) {
			break
		}
		d := schema.NewDecoder(r.Value[4:])
		anchor := d.String()
		for _, t := range d.Strings() {
			counts[t]++
		}
		if err := d.Err(); err != nil {
			return false, err
		}
		if err := set(schema.PagesTable, row, framework.Column{Family: schema.InlinkFamily, Qualifier: string(source)}, []byte(anchor)); err != nil {
			return false, err
		}
		n++
		j.prog.add(1)
	}
	if n > 0 {
		if err := set(schema.PagesTable, row, schema.InlinkCountCol, strconv.AppendInt(nil, n, 10)); err != nil {
			return false, err
		}
	}
	if len(counts) > 0 {
		if err := set(schema.PagesTable, row, schema.AnchorTermsCol, schema.EncodeTermCounts(counts)); err != nil {
			return false, err
		}
	}
	return inOK, nil
}

// outlinkStream hands each page's outlinks, by page ordinal, to the
// pages' pass, read from the outlinks run by a goroutine of its own so
// that the read overlaps the writing.
type outlinkStream struct {
	ch  chan outlinks
	err chan error
	cur *outlinks
}

type outlinks struct {
	src  uint32
	urls []string
}

// streamOutlinks starts reading sc's outlinks until ctx ends.
func streamOutlinks(ctx context.Context, sc *bulkScan) *outlinkStream {
	o := &outlinkStream{ch: make(chan outlinks, 64), err: make(chan error, 1)}
	go func() {
		defer close(o.ch)
		o.err <- eachOutlinks(ctx, sc.outlinks, func(src uint32, urls []string, _ []uint32) error {
			select {
			case o.ch <- outlinks{src: src, urls: append([]string(nil), urls...)}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return o
}

// of returns the outlinks of page id, nil if it has none (or on a nil
// stream: no PageRank). Pages ask in ordinal order.
func (o *outlinkStream) of(id uint32) []string {
	if o == nil {
		return nil
	}
	for {
		if o.cur == nil {
			l, ok := <-o.ch
			if !ok {
				return nil
			}
			o.cur = &l
		}
		switch {
		case o.cur.src < id:
			o.cur = nil
		case o.cur.src == id:
			return o.cur.urls
		default:
			return nil
		}
	}
}

// finish drains the stream and returns the reader's error. A nil stream
// has none.
func (o *outlinkStream) finish() error {
	if o == nil {
		return nil
	}
	for range o.ch {
	}
	return <-o.err
}

// setPageCells passes a page's own cells (scanned), its canonical row
// (the next of canon, by ordinal id) and, with PageRank, its state.
func (j *bulkJob) setPageCells(row, cells []byte, id uint32, canon *extsort.Iterator, outlinks func(id uint32) []string, set schema.SetFunc) error {
	d := schema.NewDecoder(cells)
	for d.Len() > 0 {
		col := framework.Column{Family: d.String(), Qualifier: d.String()}
		value := d.String()
		if err := d.Err(); err != nil {
			return err
		}
		if err := set(schema.PagesTable, row, col, []byte(value)); err != nil {
			return err
		}
	}
	if !canon.Next() || binary.BigEndian.Uint32(canon.Record().Key) != id {
		if err := canon.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: bulk load: no canonical row for page %q", schema.ErrCorrupt, row)
	}
	if err := set(schema.PagesTable, row, schema.RowCol, canon.Record().Value); err != nil {
		return err
	}
	if j.pr != nil {
		return setBulkPageRank(row, j.pr.state(id, outlinks(id)), set)
	}
	return nil
}

// setTerms passes the terms table: each term's anchor then text
// postings, in cluster order.
func (j *bulkJob) setTerms(ctx context.Context, postings *extsort.Sorter, set schema.SetFunc) error {
	j.prog.start("writing postings", postings.Len())
	var term []byte
	var text, anchor []bulkPosting
	flush := func() error {
		if len(text)+len(anchor) == 0 {
			return nil
		}
		return setTermPostings(ctx, string(term), text, anchor, set)
	}
	it := postings.Iter(ctx)
	defer it.Close()
	for it.Next() {
		r := it.Record()
		t, rest := splitKey(r.Key)
		if string(t) != string(term) {
			if err := flush(); err != nil {
				return err
			}
			term, text, anchor = append(term[:0], t...), text[:0], anchor[:0]
		}
		if len(rest) != 5 {
			return fmt.Errorf("%w: bulk load: posting key of %d bytes", schema.ErrCorrupt, len(r.Key))
		}
		tf, n := binary.Uvarint(r.Value)
		if n <= 0 {
			return fmt.Errorf("%w: bulk load: posting value", schema.ErrCorrupt)
		}
		p := bulkPosting{cluster: j.keys.get(binary.BigEndian.Uint32(rest[1:])), tf: int64(tf)}
		if rest[0] == postingAnchor {
			anchor = append(anchor, p)
		} else {
			text = append(text, p)
		}
		j.prog.add(1)
	}
	if err := it.Err(); err != nil {
		return err
	}
	return flush()
}

// bulkPosting is a cluster's search posting under a term.
type bulkPosting struct {
	cluster string
	tf      int64
}

// setTermPostings passes the text and anchor postings of one term to set
// in the order of their cells: by family, then cluster (each list is in
// cluster order). They are most of an index's cells; written in key
// order, the import's chunks of them cover disjoint key ranges, so the
// store takes each as it is instead of compacting overlapping ones
// together afterwards.
func setTermPostings(ctx context.Context, term string, postings, anchorPostings []bulkPosting, set schema.SetFunc) error {
	row := []byte(term)
	for _, p := range anchorPostings {
		if err := set(schema.TermsTable, row, framework.Column{Family: schema.AnchorFamily, Qualifier: p.cluster}, schema.EncodePosting(p.tf)); err != nil {
			return err
		}
	}
	for _, p := range postings {
		if err := set(schema.TermsTable, row, framework.Column{Family: schema.PostingFamily, Qualifier: p.cluster}, schema.EncodePosting(p.tf)); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// setSortedCells passes the cells of table a sorter holds (row, then the
// column and value), in order.
func setSortedCells(ctx context.Context, table string, cells *extsort.Sorter, set schema.SetFunc) error {
	for r, err := range cells.All(ctx) {
		if err != nil {
			return err
		}
		d := schema.NewDecoder(r.Value)
		col := framework.Column{Family: d.String(), Qualifier: d.String()}
		value := d.String()
		if err := d.Err(); err != nil {
			return err
		}
		if err := set(table, r.Key, col, []byte(value)); err != nil {
			return err
		}
	}
	return nil
}
