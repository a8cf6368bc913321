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

// merge yields the records of runs in order, merged with a heap of their
// readers, each run opened once.
func (s *Sorter) merge(ctx context.Context, runs []string) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		h := make(mergeHeap, 0, len(runs))
		defer func() {
			for _, rr := range h {
				rr.f.Close()
			}
		}()
		for _, p := range runs {
			rr, err := openRun(p, s.opts.ReadBuffer)
			if err != nil {
				yield(Record{}, err)
				return
			}
			ok, err := rr.next()
			if err != nil || !ok {
				rr.f.Close()
				if err != nil {
					yield(Record{}, err)
					return
				}
				continue
			}
			h = append(h, rr)
		}
		for i := len(h)/2 - 1; i >= 0; i-- {
			h.down(i)
		}
		for n := 0; len(h) > 0; n++ {
			if n%1024 == 0 {
				if err := ctx.Err(); err != nil {
					yield(Record{}, err)
					return
				}
			}
			top := h[0]
			if !yield(Record{Key: top.key, Value: top.value}, nil) {
				return
			}
			ok, err := top.next()
			switch {
			case err != nil:
				yield(Record{}, err)
				return
			case ok:
				h.down(0)
			default:
				top.f.Close()
				last := len(h) - 1
				h[0] = h[last]
				h = h[:last]
				if last > 0 {
					h.down(0)
				}
			}
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
