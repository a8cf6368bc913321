package bulk

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/trickle-dev/trickle/internal/extsort"
	"github.com/trickle-dev/trickle/pipelines/webindex/ranking"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// bulkRanks are the PageRank estimates of a bulk load's pages, by
// ordinal: the estimate x̂ and the next iterate, whose difference is the
// residual stored with it.
type bulkRanks struct {
	x, next []float64
}

// rank is the page's rank as PageRankRanker gives it.
func (r *bulkRanks) rank(id uint32) int64 { return int64(math.Round(r.x[id] * schema.PageRankScale)) }

// state is the page's PageRank state; out are its outlinks to loaded
// pages, sorted and cut at MaxPROutlinks.
func (r *bulkRanks) state(id uint32, out []string) *schema.PRState {
	return &schema.PRState{Loaded: true, Out: out, Rank: r.x[id], Residual: r.next[id] - r.x[id]}
}

// pageRank computes the PageRank state the observers would converge to
// for the scanned pages: the estimate x̂ of a Jacobi iteration
// x ← (1-α)·1 + α·Hᵀx run until its step, which is exactly the residual
// r = (1-α)·1 + α·Hᵀx̂ - x̂ of the estimate, is far below the tolerance
// everywhere. The estimate and that residual are stored together, so the
// identity the push observers keep holds from the start, no push is due,
// and later changes are corrected against it as if the pages had been
// loaded one by one.
//
// The graph is read from outlinks (source ordinal and target URL, to
// the target's ordinal), cut at MaxPROutlinks per page, into a file of
// ordinals each iteration streams through, or holds in memory when it
// takes less than a sixteenth of the budget. Only the two vectors are
// per page.
func (j *bulkJob) pageRank(ctx context.Context, outlinks *extsort.Sorter, tolerance float64) (*bulkRanks, error) {
	if err := outlinks.Finish(ctx); err != nil {
		return nil, err
	}
	j.prog.start("ranking pages", outlinks.Len())
	path := filepath.Join(j.dir, "edges")
	size, err := writeEdges(ctx, outlinks, path)
	if err != nil {
		return nil, err
	}
	g := &edgeFile{path: path}
	if size <= j.memory/16 {
		if g.held, err = readEdges(path); err != nil {
			return nil, err
		}
	}
	n := j.pages
	r := &bulkRanks{x: make([]float64, n), next: make([]float64, n)}
	for i := range r.x {
		r.x[i] = 1 - ranking.Damping
	}
	// The step shrinks by α per iteration; stop well inside ε, so that a
	// bulk-loaded index is as exact as a settled incremental one can be.
	limit := tolerance / 1024
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for i := range r.next {
			r.next[i] = 1 - ranking.Damping
		}
		err := g.each(func(src uint32, ts []uint32) {
			share := ranking.Damping * r.x[src] / float64(len(ts))
			for _, t := range ts {
				r.next[t] += share
			}
		})
		if err != nil {
			return nil, err
		}
		var step float64
		for i := range r.x {
			step = max(step, math.Abs(r.next[i]-r.x[i]))
		}
		j.prog.add(0)
		if step <= limit {
			return r, nil
		}
		r.x, r.next = r.next, r.x
	}
}

// eachOutlinks calls fn with each source's outlinks to loaded pages, in
// ordinal order: their URLs (sorted, cut at MaxPROutlinks) and ordinals.
// The slices are reused.
func eachOutlinks(ctx context.Context, outlinks *extsort.Sorter, fn func(src uint32, urls []string, ids []uint32) error) error {
	var src uint32
	var urls []string
	var ids []uint32
	flush := func() error {
		if len(ids) == 0 {
			return nil
		}
		return fn(src, urls, ids)
	}
	it := outlinks.Iter(ctx)
	defer it.Close()
	for it.Next() {
		r := it.Record()
		s := binary.BigEndian.Uint32(r.Key)
		if s != src || len(ids) == 0 {
			if err := flush(); err != nil {
				return err
			}
			src, urls, ids = s, urls[:0], ids[:0]
		}
		if len(ids) < schema.MaxPROutlinks {
			urls = append(urls, string(r.Key[4:]))
			ids = append(ids, binary.BigEndian.Uint32(r.Value))
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	return flush()
}

// writeEdges writes the graph of outlinks to path: per source with
// outlinks, its ordinal, their number and theirs, each a little-endian
// uint32. It returns the file's size.
func writeEdges(ctx context.Context, outlinks *extsort.Sorter, path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("webindex: bulk load: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 256<<10)
	var size int64
	var b []byte
	err = eachOutlinks(ctx, outlinks, func(src uint32, _ []string, ids []uint32) error {
		b = binary.LittleEndian.AppendUint32(b[:0], src)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(ids)))
		for _, t := range ids {
			b = binary.LittleEndian.AppendUint32(b, t)
		}
		size += int64(len(b))
		_, err := w.Write(b)
		return err
	})
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		return 0, fmt.Errorf("webindex: bulk load: writing the link graph: %w", err)
	}
	return size, nil
}

// readEdges reads a file writeEdges wrote into memory.
func readEdges(path string) ([]uint32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("webindex: bulk load: reading the link graph: %w", err)
	}
	out := make([]uint32, len(b)/4)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out, nil
}

// edgeFile is the link graph writeEdges wrote, read from its file or
// from memory.
type edgeFile struct {
	path string
	held []uint32 // the file's words, if held in memory
}

// each calls fn with each source's targets, in order; ts is reused.
func (g *edgeFile) each(fn func(src uint32, ts []uint32)) error {
	if g.held != nil {
		for w := g.held; len(w) >= 2; {
			n := int(w[1])
			fn(w[0], w[2:2+n])
			w = w[2+n:]
		}
		return nil
	}
	f, err := os.Open(g.path)
	if err != nil {
		return fmt.Errorf("webindex: bulk load: reading the link graph: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var hdr [8]byte
	var buf []byte
	var ts []uint32
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("webindex: bulk load: reading the link graph: %w", err)
		}
		n := int(binary.LittleEndian.Uint32(hdr[4:]))
		if cap(buf) < 4*n {
			buf, ts = make([]byte, 4*n), make([]uint32, n)
		}
		buf, ts = buf[:4*n], ts[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("webindex: bulk load: reading the link graph: %w", err)
		}
		for i := range ts {
			ts[i] = binary.LittleEndian.Uint32(buf[4*i:])
		}
		fn(binary.LittleEndian.Uint32(hdr[:4]), ts)
	}
}

// setBulkPageRank passes the PageRank cells of a bulk-loaded page's row to
// set: its state st, and the mark that its sources count it as loaded.
func setBulkPageRank(row []byte, st *schema.PRState, set schema.SetFunc) error {
	if err := set(schema.PagesTable, row, schema.PRStateCol, schema.EncodePRState(st)); err != nil {
		return err
	}
	return set(schema.PagesTable, row, schema.PRAnnounced, nil)
}
