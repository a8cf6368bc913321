package bulk

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/trickle-dev/trickle/internal/extsort"
	"github.com/trickle-dev/trickle/pipelines/webindex/schema"
)

// bulkJob is one streaming bulk computation: where it spills, what it
// may hold, and its sorters, which hold the tables while they are
// computed.
type bulkJob struct {
	cfg      *Config
	memory   int64
	dir      string // the job's temporary directory, removed by close
	log      *slog.Logger
	expected int64
	prog     *bulkProgress
	sorters  []*extsort.Sorter
	pr       *bulkRanks // with Options.PageRank

	// Counted while the pages are scanned.
	pages, links, anchorTerms int64
	// Counted while the clusters are ranked.
	clusters, docs, words int64
	// keys are the clusters' keys by ordinal (their order): the
	// postings name clusters by ordinal while they are sorted.
	keys clusterKeys
}

// Shares of the budget each sorter's buffer gets: the sorters of one
// phase together take half of it, leaving the rest to the pages being
// parsed, the importer's chunks and the garbage collector.
const (
	shareInlinks  = 8  // inlinks by target
	shareClusters = 8  // members and their inlinks by cluster
	shareOutlinks = 16 // outlinks to loaded pages by source (PageRank)
	sharePostings = 8  // postings by term
	shareRows     = 32 // canonical rows by page
	shareLists    = 64 // each of the top and sites lists
)

// newBulkJob makes the job's temporary directory under dir.
func newBulkJob(cfg *Config) (*bulkJob, error) {
	dir, err := os.MkdirTemp(cfg.TempDir, "trickle-bulk-")
	if err != nil {
		return nil, fmt.Errorf("webindex: bulk load: making its spill directory: %w", err)
	}
	j := &bulkJob{cfg: cfg, memory: cfg.MemoryBytes, dir: dir, log: cfg.Logger, expected: cfg.ExpectedPages}
	// Scanning, inverting, ranking clusters, writing pages and postings;
	// ranking pages too with PageRank.
	steps := 5
	if cfg.PageRank {
		steps++
	}
	j.prog = newBulkProgress(j.log, steps)
	return j, nil
}

// close removes everything the job spilled.
func (j *bulkJob) close() error {
	var errs []error
	for _, s := range j.sorters {
		errs = append(errs, s.Close())
	}
	errs = append(errs, os.RemoveAll(j.dir))
	return errors.Join(errs...)
}

// sorter returns a new sorter with a share of the budget (1/share).
func (j *bulkJob) sorter(share int64) (*extsort.Sorter, error) {
	s, err := extsort.New(&extsort.Options{Dir: j.dir, MemoryBytes: max(j.memory/share, 4<<10)})
	if err != nil {
		return nil, err
	}
	j.sorters = append(j.sorters, s)
	return s, nil
}

// spills sums what the job's sorters wrote.
func (j *bulkJob) spills() (runs int, bytes int64) {
	for _, s := range j.sorters {
		st := s.Stats()
		runs += st.Spills + st.Merges
		bytes += st.SpilledBytes
	}
	return runs, bytes
}

// seqWriter writes a file of length-prefixed records in the order they
// come: a table already in order needs no sort.
type seqWriter struct {
	path string
	f    *os.File
	w    *bufio.Writer
	hdr  [binary.MaxVarintLen64]byte
}

func (j *bulkJob) createSeq(name string) (*seqWriter, error) {
	path := filepath.Join(j.dir, name)
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("webindex: bulk load: %w", err)
	}
	return &seqWriter{path: path, f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

func (w *seqWriter) add(b []byte) error {
	w.w.Write(binary.AppendUvarint(w.hdr[:0], uint64(len(b))))
	if _, err := w.w.Write(b); err != nil {
		return fmt.Errorf("webindex: bulk load: writing %s: %w", filepath.Base(w.path), err)
	}
	return nil
}

func (w *seqWriter) close() error {
	err := w.w.Flush()
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("webindex: bulk load: writing %s: %w", filepath.Base(w.path), err)
	}
	return nil
}

// seqReader reads the records of a seqWriter's file back.
type seqReader struct {
	f   *os.File
	r   *bufio.Reader
	buf []byte
	err error
}

func openSeq(path string) (*seqReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("webindex: bulk load: %w", err)
	}
	return &seqReader{f: f, r: bufio.NewReaderSize(f, 256<<10)}, nil
}

// next returns the next record, valid until the next call, or false at
// the end or on an error (err).
func (r *seqReader) next() ([]byte, bool) {
	if r.err != nil {
		return nil, false
	}
	n, err := binary.ReadUvarint(r.r)
	if err == io.EOF {
		return nil, false
	}
	if err == nil && n > 1<<34 {
		err = fmt.Errorf("%w: record of %d bytes", schema.ErrCorrupt, n)
	}
	if err == nil {
		if uint64(cap(r.buf)) < n {
			r.buf = make([]byte, n)
		}
		r.buf = r.buf[:n]
		_, err = io.ReadFull(r.r, r.buf)
	}
	if err != nil {
		r.err = fmt.Errorf("webindex: bulk load: reading %s: %w", filepath.Base(r.f.Name()), err)
		return nil, false
	}
	return r.buf, true
}

func (r *seqReader) close() { r.f.Close() }

// clusterKeys holds strings by ordinal in one buffer.
type clusterKeys struct {
	data []byte
	ends []uint32
}

func (k *clusterKeys) add(s string) {
	k.data = append(k.data, s...)
	k.ends = append(k.ends, uint32(len(k.data)))
}

func (k *clusterKeys) get(i uint32) string {
	var start uint32
	if i > 0 {
		start = k.ends[i-1]
	}
	return string(k.data[start:k.ends[i]])
}

// splitKey splits a sort key at its first NUL: URLs, cluster keys and
// terms hold none, so a NUL ends the first part and sorts it before any
// longer one.
func splitKey(b []byte) (first, rest []byte) {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// appendID appends a page's or cluster's ordinal, fixed width, so that
// ordinals sort as numbers.
func appendID(b []byte, id uint32) []byte { return binary.BigEndian.AppendUint32(b, id) }

// appendStrings appends a count and that many strings (decoder.strings
// reads them).
func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = schema.AppendString(b, s)
	}
	return b
}
