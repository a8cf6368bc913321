package extsort

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
)

// runReader reads one run's records in order.
type runReader struct {
	f          *os.File
	r          *bufio.Reader
	buf        []byte // the current record's key, then value
	klen       int
	key, value []byte
}

func openRun(path string, size int) (*runReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("extsort: opening a run: %w", err)
	}
	return &runReader{f: f, r: bufio.NewReaderSize(f, size)}, nil
}

// next reads the next record, returning false at the end of the run.
func (rr *runReader) next() (bool, error) {
	klen, err := binary.ReadUvarint(rr.r)
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("extsort: reading a run: %w", unexpected(err))
	}
	vlen, err := binary.ReadUvarint(rr.r)
	if err != nil {
		return false, fmt.Errorf("extsort: reading a run: %w", unexpected(err))
	}
	if klen+vlen > 1<<32 {
		return false, fmt.Errorf("extsort: reading a run: record of %d+%d bytes: the run is corrupt", klen, vlen)
	}
	n := int(klen + vlen)
	if cap(rr.buf) < n {
		rr.buf = make([]byte, n, max(n, 2*cap(rr.buf)))
	}
	rr.buf = rr.buf[:n]
	if _, err := io.ReadFull(rr.r, rr.buf); err != nil {
		return false, fmt.Errorf("extsort: reading a run: %w", unexpected(err))
	}
	rr.key, rr.value = rr.buf[:klen], rr.buf[klen:]
	return true, nil
}

// unexpected turns an end of file inside a record into ErrUnexpectedEOF.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Iterator reads a finished sorter's records in order, one Next at a
// time: the pull form of All, for merging several sorted streams.
type Iterator struct {
	s       *Sorter
	ctx     context.Context
	runs    []string
	h       mergeHeap
	opened  bool
	mem     int // the next buffered record, when there are no runs
	advance bool
	cur     Record
	err     error
	n       int
}

// Iter returns an Iterator over the records, in order. Close it.
func (s *Sorter) Iter(ctx context.Context) *Iterator {
	it := &Iterator{s: s, ctx: ctx, runs: s.runs}
	if !s.finished || s.closed {
		it.err = ErrFinished
	}
	return it
}

// iterRuns returns an Iterator merging runs.
func (s *Sorter) iterRuns(ctx context.Context, runs []string) *Iterator {
	return &Iterator{s: s, ctx: ctx, runs: runs}
}

// Next moves to the next record, reporting false at the end or on an
// error (see Err).
func (it *Iterator) Next() bool {
	if it.err != nil {
		return false
	}
	if it.n%1024 == 0 {
		if err := it.ctx.Err(); err != nil {
			it.fail(err)
			return false
		}
	}
	it.n++
	if len(it.runs) == 0 {
		if it.mem >= len(it.s.recs) {
			return false
		}
		r := it.s.recs[it.mem]
		it.mem++
		it.cur = Record{Key: it.s.key(r), Value: it.s.value(r)}
		return true
	}
	if !it.opened {
		it.opened = true
		if err := it.open(); err != nil {
			it.fail(err)
			return false
		}
	} else if it.advance && len(it.h) > 0 {
		top := it.h[0]
		ok, err := top.next()
		switch {
		case err != nil:
			it.fail(err)
			return false
		case ok:
			it.h.down(0)
		default:
			top.f.Close()
			last := len(it.h) - 1
			it.h[0] = it.h[last]
			it.h = it.h[:last]
			if last > 0 {
				it.h.down(0)
			}
		}
	}
	if len(it.h) == 0 {
		return false
	}
	it.advance = true
	it.cur = Record{Key: it.h[0].key, Value: it.h[0].value}
	return true
}

// open opens every run and heaps their first records.
func (it *Iterator) open() error {
	it.h = make(mergeHeap, 0, len(it.runs))
	for _, p := range it.runs {
		rr, err := openRun(p, it.s.opts.ReadBuffer)
		if err != nil {
			return err
		}
		ok, err := rr.next()
		if err != nil || !ok {
			rr.f.Close()
			if err != nil {
				return err
			}
			continue
		}
		it.h = append(it.h, rr)
	}
	for i := len(it.h)/2 - 1; i >= 0; i-- {
		it.h.down(i)
	}
	return nil
}

// Record is the current record, valid until the next call of Next.
func (it *Iterator) Record() Record { return it.cur }

// Err is the error that ended the iteration, if any.
func (it *Iterator) Err() error { return it.err }

func (it *Iterator) fail(err error) {
	it.err = err
	it.Close()
}

// Close closes the runs' files. The iterator ends.
func (it *Iterator) Close() error {
	for _, rr := range it.h {
		rr.f.Close()
	}
	it.h, it.runs, it.opened, it.mem = nil, nil, true, len(it.s.recs)
	return nil
}

// merge yields the records of runs in order.
func (s *Sorter) merge(ctx context.Context, runs []string) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		it := s.iterRuns(ctx, runs)
		defer it.Close()
		for it.Next() {
			if !yield(it.Record(), nil) {
				return
			}
		}
		if it.Err() != nil {
			yield(Record{}, it.Err())
		}
	}
}

// mergeHeap is a min-heap of run readers by their current record.
type mergeHeap []*runReader

func (h mergeHeap) less(i, j int) bool {
	return compare(h[i].key, h[i].value, h[j].key, h[j].value) < 0
}

// down moves the reader at i down to its place.
func (h mergeHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
