// Package extsort sorts key/value records that may not fit in memory: an
// external merge sort. Records are buffered up to a memory budget, then
// sorted and written as a run to a temporary directory; once every record
// is added, the runs are merged with a heap (in several passes when there
// are more runs than may be open at once) and read back in order.
//
// Records sort by key, then by value, bytewise, so that the order is total
// and a sort is deterministic whatever the budget. Duplicates are kept.
// A run holds each record as its key's and value's lengths (uvarints)
// followed by their bytes, without compression: the records of a bulk
// computation are mostly short, and the disk is faster than a compressor.
//
// The package knows nothing of what it sorts; it is used by the web
// index's bulk load to compute tables far larger than memory.
package extsort

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
)

// ErrInvalidOptions is wrapped by every error Options.Validate returns.
var ErrInvalidOptions = errors.New("extsort: invalid options")

// ErrFinished is returned by Add once Finish was called, and by All
// before it was.
var ErrFinished = errors.New("extsort: the sorter is finished")

// Defaults of Options.
const (
	DefaultMemoryBytes = 64 << 20
	DefaultMaxFanIn    = 64
)

// recOverhead is what the buffer spends on a record besides its bytes.
const recOverhead = 24

// Options configure a Sorter. The zero value is usable.
type Options struct {
	// Dir is where the sorter makes its temporary directory of runs,
	// removed by Close. Default: os.TempDir().
	Dir string
	// MemoryBytes is about how much memory the records buffered before a
	// spill may use (their bytes and 24 bytes each). A record larger than
	// that is buffered alone. Default: 64 MiB.
	MemoryBytes int64
	// MaxFanIn is how many runs are merged at once, each with an open
	// file and a read buffer of ReadBuffer bytes; with more, runs are
	// merged into fewer first. Default: 64.
	MaxFanIn int
	// ReadBuffer and WriteBuffer are the buffer sizes of a run being read
	// and being written. Default: 64 KiB and 256 KiB.
	ReadBuffer, WriteBuffer int
}

// EnsureDefaults fills unset fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Dir == "" {
		o.Dir = os.TempDir()
	}
	if o.MemoryBytes == 0 {
		o.MemoryBytes = DefaultMemoryBytes
	}
	if o.MaxFanIn == 0 {
		o.MaxFanIn = DefaultMaxFanIn
	}
	if o.ReadBuffer == 0 {
		o.ReadBuffer = 64 << 10
	}
	if o.WriteBuffer == 0 {
		o.WriteBuffer = 256 << 10
	}
	return o
}

// Validate reports the first unusable field.
func (o *Options) Validate() error {
	switch {
	case o.MemoryBytes < 1:
		return fmt.Errorf("%w: MemoryBytes %d must be positive", ErrInvalidOptions, o.MemoryBytes)
	case o.MaxFanIn < 2:
		return fmt.Errorf("%w: MaxFanIn %d must be at least 2", ErrInvalidOptions, o.MaxFanIn)
	case o.ReadBuffer < 16 || o.WriteBuffer < 16:
		return fmt.Errorf("%w: ReadBuffer and WriteBuffer must be at least 16 bytes", ErrInvalidOptions)
	}
	return nil
}

// Stats count what a sorter did.
type Stats struct {
	// Records is the number of records added.
	Records int64
	// Spills is the number of runs written from the buffer.
	Spills int
	// Merges is the number of runs written by merging others (when
	// there were more than MaxFanIn).
	Merges int
	// Runs is the number of runs All merges (0: the records are sorted
	// in memory).
	Runs int
	// SpilledBytes is the size of the runs written, merges included.
	SpilledBytes int64
}

// Record is a sorted record. Its slices are only valid until the
// iteration moves on: copy what is kept.
type Record struct {
	Key, Value []byte
}

// Sorter sorts records: Add them, Finish, then read them in order with
// All, as many times as needed; Close removes its files. It is not safe
// for concurrent use.
type Sorter struct {
	opts     Options
	dir      string // made at the first spill
	data     []byte
	recs     []rec
	runs     []string
	stats    Stats
	finished bool
	closed   bool
}

// rec is a buffered record: its key at data[off:off+klen], then its
// value; prefix is the key's first 8 bytes as a big-endian number
// (zero-padded), which orders most pairs of records without reading
// their bytes.
type rec struct {
	off        int
	prefix     uint64
	klen, vlen int32
}

// keyPrefix is the first 8 bytes of key as a big-endian number, padded
// with zeros: keys in different order have prefixes in that order or
// equal ones.
func keyPrefix(key []byte) uint64 {
	if len(key) >= 8 {
		return binary.BigEndian.Uint64(key)
	}
	var b [8]byte
	copy(b[:], key)
	return binary.BigEndian.Uint64(b[:])
}

// New returns an empty Sorter. Nothing is written until the buffer is
// full, so a sort that fits in memory touches no disk.
func New(opts *Options) (*Sorter, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Sorter{opts: o}, nil
}

// Add adds a record; key and value are copied. It spills the buffer
// first if the record would take it past the budget, and returns the
// error of that spill.
func (s *Sorter) Add(key, value []byte) error {
	if s.finished || s.closed {
		return ErrFinished
	}
	if len(key) > 1<<31-1 || len(value) > 1<<31-1 {
		return fmt.Errorf("extsort: record of %d+%d bytes is too large", len(key), len(value))
	}
	if len(s.recs) > 0 && s.buffered()+int64(len(key)+len(value)+recOverhead) > s.opts.MemoryBytes {
		if err := s.spill(); err != nil {
			return err
		}
	}
	off := len(s.data)
	if need := off + len(key) + len(value); need > cap(s.data) {
		// Grow by doubling, but not past the budget: the buffer is most
		// of a sorter's memory.
		c := max(need, min(max(2*cap(s.data), 64<<10), int(min(s.opts.MemoryBytes, 1<<40))))
		data := make([]byte, off, c)
		copy(data, s.data)
		s.data = data
	}
	s.data = append(append(s.data, key...), value...)
	s.recs = append(s.recs, rec{off: off, prefix: keyPrefix(key), klen: int32(len(key)), vlen: int32(len(value))})
	s.stats.Records++
	return nil
}

// Len is the number of records added.
func (s *Sorter) Len() int64 { return s.stats.Records }

// Stats reports what the sorter did so far.
func (s *Sorter) Stats() Stats {
	st := s.stats
	st.Runs = len(s.runs)
	return st
}

// buffered is the memory the buffer uses by the budget's count.
func (s *Sorter) buffered() int64 {
	return int64(len(s.data)) + int64(len(s.recs))*recOverhead
}

func (s *Sorter) key(r rec) []byte { return s.data[r.off : r.off+int(r.klen)] }
func (s *Sorter) value(r rec) []byte {
	return s.data[r.off+int(r.klen) : r.off+int(r.klen)+int(r.vlen)]
}

// compare orders records by key, then value.
func compare(ka, va, kb, vb []byte) int {
	if c := bytes.Compare(ka, kb); c != 0 {
		return c
	}
	return bytes.Compare(va, vb)
}

// sortBuffer sorts the buffered records.
func (s *Sorter) sortBuffer() {
	slices.SortFunc(s.recs, func(a, b rec) int {
		switch {
		case a.prefix < b.prefix:
			return -1
		case a.prefix > b.prefix:
			return 1
		}
		return compare(s.key(a), s.value(a), s.key(b), s.value(b))
	})
}

// spill sorts the buffer and writes it as a run, then empties it (keeping
// its memory for the next records).
func (s *Sorter) spill() error {
	if len(s.recs) == 0 {
		return nil
	}
	s.sortBuffer()
	w, err := s.create()
	if err != nil {
		return err
	}
	for _, r := range s.recs {
		if err := w.write(s.key(r), s.value(r)); err != nil {
			w.abandon()
			return err
		}
	}
	if err := w.close(); err != nil {
		return err
	}
	s.runs = append(s.runs, w.path)
	s.stats.Spills++
	s.stats.SpilledBytes += w.n
	s.data, s.recs = s.data[:0], s.recs[:0]
	return nil
}

// Finish ends the adding. If anything was spilled, the rest of the buffer
// is spilled too and, while there are more runs than MaxFanIn, runs are
// merged into fewer, so that All merges at most MaxFanIn.
func (s *Sorter) Finish(ctx context.Context) error {
	if s.finished || s.closed {
		return ErrFinished
	}
	s.finished = true
	if len(s.runs) == 0 {
		s.sortBuffer()
		return nil
	}
	if err := s.spill(); err != nil {
		return err
	}
	s.data, s.recs = nil, nil
	for len(s.runs) > s.opts.MaxFanIn {
		n := min(s.opts.MaxFanIn, len(s.runs)-s.opts.MaxFanIn+1)
		if err := s.mergeFirst(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// mergeFirst merges the first n runs into one, put last.
func (s *Sorter) mergeFirst(ctx context.Context, n int) error {
	w, err := s.create()
	if err != nil {
		return err
	}
	for r, err := range s.merge(ctx, s.runs[:n]) {
		if err == nil {
			err = w.write(r.Key, r.Value)
		}
		if err != nil {
			w.abandon()
			return err
		}
	}
	if err := w.close(); err != nil {
		return err
	}
	for _, p := range s.runs[:n] {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("extsort: removing a merged run: %w", err)
		}
	}
	s.runs = append(slices.Clone(s.runs[n:]), w.path)
	s.stats.Merges++
	s.stats.SpilledBytes += w.n
	return nil
}

// All yields the records in order (by key, then value). It may be called
// any number of times once Finish returned; each call reads the runs
// again. It stops with ctx's error if ctx ends.
func (s *Sorter) All(ctx context.Context) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		it := s.Iter(ctx)
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

// Close removes the sorter's runs and its directory, and drops its
// buffer. The sorter is unusable afterwards.
func (s *Sorter) Close() error {
	s.closed = true
	s.data, s.recs, s.runs = nil, nil, nil
	if s.dir == "" {
		return nil
	}
	dir := s.dir
	s.dir = ""
	return os.RemoveAll(dir)
}

// create starts a new run file, making the sorter's directory first if
// need be.
func (s *Sorter) create() (*runWriter, error) {
	if s.dir == "" {
		dir, err := os.MkdirTemp(s.opts.Dir, "extsort-")
		if err != nil {
			return nil, fmt.Errorf("extsort: making the spill directory: %w", err)
		}
		s.dir = dir
	}
	path := filepath.Join(s.dir, fmt.Sprintf("run-%06d", s.stats.Spills+s.stats.Merges))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("extsort: creating a run: %w", err)
	}
	return &runWriter{path: path, f: f, w: bufio.NewWriterSize(f, s.opts.WriteBuffer)}, nil
}

// runWriter writes one run.
type runWriter struct {
	path string
	f    *os.File
	w    *bufio.Writer
	n    int64
	hdr  [2 * binary.MaxVarintLen64]byte
}

func (w *runWriter) write(key, value []byte) error {
	h := binary.AppendUvarint(w.hdr[:0], uint64(len(key)))
	h = binary.AppendUvarint(h, uint64(len(value)))
	w.w.Write(h)
	w.w.Write(key)
	if _, err := w.w.Write(value); err != nil {
		return fmt.Errorf("extsort: writing a run: %w", err)
	}
	w.n += int64(len(h) + len(key) + len(value))
	return nil
}

func (w *runWriter) close() error {
	err := w.w.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(w.path)
		return fmt.Errorf("extsort: writing a run: %w", err)
	}
	return nil
}

// abandon closes and removes a run that failed half way.
func (w *runWriter) abandon() {
	w.f.Close()
	os.Remove(w.path)
}
