package loader

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trickle-dev/trickle/internal/batchpipe"
	"github.com/trickle-dev/trickle/internal/extsort"
	"github.com/trickle-dev/trickle/loader/input"
	"github.com/trickle-dev/trickle/pipelines/webindex"
	"github.com/trickle-dev/trickle/pipelines/webindex/extract"
)

// BulkPhase is the step a bulk run is at: its counts say little until the
// import is done, since every page is loaded at once at its end.
type BulkPhase int32

// The steps of a bulk run, in order.
const (
	// BulkIdle: no bulk run has started (the zero value).
	BulkIdle BulkPhase = iota
	// BulkReading: reading the inputs to the end.
	BulkReading
	// BulkParsing: sorting the records read by URL, to parse the last
	// of each in that order (the parsing itself goes on while importing).
	BulkParsing
	// BulkImporting: parsing the pages, computing the whole index and
	// importing it.
	BulkImporting
	// BulkDone: the run ended, loaded or not.
	BulkDone
)

// bulkPhaseNames are the phases' names, as progress lines show them.
var bulkPhaseNames = [...]string{BulkIdle: "idle", BulkReading: "reading", BulkParsing: "sorting", BulkImporting: "computing and importing", BulkDone: "done"}

// String names the phase as progress lines show it.
func (p BulkPhase) String() string {
	if p >= 0 && int(p) < len(bulkPhaseNames) {
		return bulkPhaseNames[p]
	}
	return fmt.Sprintf("BulkPhase(%d)", int32(p))
}

// bulkState is a bulk run's progress, read by BulkProgress while it runs.
type bulkState struct {
	phase                          atomic.Int32
	parsed, toParse, pages, spills atomic.Int64
}

// BulkStatus is where a run with Options.Bulk is.
type BulkStatus struct {
	Phase BulkPhase
	// Parsed and ToParse are the pages parsed so far and known to be
	// parsed, both counted from BulkImporting on as the sorted records
	// are read: ToParse is final once every record is.
	Parsed, ToParse int64
	// Pages is the number of pages parsed for the import so far (those
	// parsed less those that failed to parse).
	Pages int64
	// Spills is the number of sorted runs the run wrote to disk, its
	// records' and its import's, known once it is done: none when
	// everything fit in BulkMemory.
	Spills int64
}

// BulkProgress reports where a run with Options.Bulk is. Progress's
// loaded count stays at zero until the import is done, since every page
// is loaded at once at its end.
func (l *Loader) BulkProgress() BulkStatus {
	return BulkStatus{Phase: BulkPhase(l.bulk.phase.Load()), Parsed: l.bulk.parsed.Load(), ToParse: l.bulk.toParse.Load(), Pages: l.bulk.pages.Load(), Spills: l.bulk.spills.Load()}
}

// setPhase moves a bulk run to phase p, and logs it.
func (l *Loader) setPhase(p BulkPhase, began time.Time, args ...any) {
	l.bulk.phase.Store(int32(p))
	l.opts.Logger.Info("bulk load: "+p.String(), append(args, "elapsed", time.Since(began).Round(time.Millisecond))...)
}

// runBulk is Run with Options.Bulk: it reads src to the end into an
// external sort of the records by URL (spilled to BulkTempDir past a
// quarter of BulkMemory), then streams the last record of each URL (a
// delete drops the URL), parsed on Concurrency goroutines, in URL order
// into the empty index (webindex.BulkLoadSorted), which computes it
// within BulkMemory too. Bad records and input errors are counted and
// reported as Run reports them; the pages are loaded at once, so Loaded
// counts every page once the import is done.
func (l *Loader) runBulk(ctx context.Context, src iter.Seq2[input.Record, error]) (Summary, error) {
	began := time.Now()
	defer l.bulk.phase.Store(int32(BulkDone))
	l.setPhase(BulkReading, began)
	recs, err := extsort.New(&extsort.Options{Dir: l.opts.BulkTempDir, MemoryBytes: l.opts.BulkMemory / 4})
	if err != nil {
		return l.summary(began), err
	}
	defer recs.Close()
	var seq uint64
	var held int64 // bytes of the bodies read
	var key, val []byte
	for rec, err := range src {
		l.syncSkipped()
		if err != nil {
			l.sourceError(err)
			continue
		}
		l.c.read.Add(1)
		norm, err := extract.NormalizeURL(rec.URL)
		if err != nil {
			l.bad(rec, "", err)
			continue
		}
		// Each URL's records sort together, in the order read.
		key = binary.BigEndian.AppendUint64(append(append(key[:0], norm.String()...), 0), seq)
		seq++
		val = encodeRecord(val[:0], rec)
		if err := recs.Add(key, val); err != nil {
			return l.summary(began), fmt.Errorf("loader: bulk load: spilling the records read: %w", err)
		}
		held += int64(len(rec.Body))
		if err := ctx.Err(); err != nil {
			return l.summary(began), fmt.Errorf("loader: bulk load stopped while reading: %w", err)
		}
	}
	l.setPhase(BulkParsing, began, "records", recs.Len(), "bytes", held)
	if err := recs.Finish(ctx); err != nil {
		return l.summary(began), fmt.Errorf("loader: bulk load: sorting the records read: %w", err)
	}
	ix, err := webindex.New(nil)
	if err != nil {
		return l.summary(began), err
	}
	l.setPhase(BulkImporting, began, "records", recs.Len())
	st, err := ix.BulkLoadSorted(ctx, l.db, l.bulkPages(ctx, recs), &webindex.BulkOptions{
		Resume: l.opts.BulkResume, MemoryBytes: l.opts.BulkMemory, TempDir: l.opts.BulkTempDir,
		ExpectedPages: recs.Len(), Logger: l.opts.Logger,
	})
	rs := recs.Stats()
	l.bulk.spills.Store(int64(rs.Spills+rs.Merges) + int64(st.Spills))
	if err == nil {
		l.c.loaded.Add(int64(st.Pages))
		l.opts.Logger.Info("bulk load done", "pages", st.Pages, "written_meanwhile", st.Fenced, "resumed", st.Resumed,
			"spilled_runs", l.bulk.spills.Load(), "spilled_bytes", rs.SpilledBytes+st.SpilledBytes, "elapsed", time.Since(began).Round(time.Millisecond))
	}
	return l.summary(began), err
}

// parseBatch is how many records are parsed at a time per goroutine.
const parseBatch = 64

// bulkPages yields the pages of the last record of each URL of recs
// (sorted by URL, then as read), parsed on Concurrency goroutines, in
// URL order; reading the records, parsing a batch and yielding the last
// overlap. Superseded, deleted and bad records are counted (once, if the
// pages are ranged over again).
func (l *Loader) bulkPages(ctx context.Context, recs *extsort.Sorter) iter.Seq2[*extract.Page, error] {
	var counted atomic.Bool
	type parsed struct {
		items []item
		pages []*extract.Page
	}
	return func(yield func(*extract.Page, error) bool) {
		count := counted.CompareAndSwap(false, true)
		size := parseBatch * l.opts.Concurrency
		produce := func(ctx context.Context, send func(*parsed) bool) error {
			b := &parsed{items: make([]item, 0, size)}
			var last []byte // the URL whose records are being read
			var lastRec []byte
			group := 0
			take := func() error {
				if group == 0 {
					return nil
				}
				if count {
					l.c.superseded.Add(int64(group - 1))
				}
				rec, err := decodeRecord(lastRec)
				if err != nil || rec.Delete {
					return err
				}
				if count {
					l.bulk.toParse.Add(1)
				}
				u, err := extract.NormalizeURL(string(last)) // canonical already: the same
				if err != nil {
					return err
				}
				if b.items = append(b.items, item{rec: rec, url: u}); len(b.items) == size {
					if !send(b) {
						return ctx.Err()
					}
					b = &parsed{items: make([]item, 0, size)}
				}
				return nil
			}
			it := recs.Iter(ctx)
			defer it.Close()
			for it.Next() {
				r := it.Record()
				u := r.Key[:len(r.Key)-9]
				if group > 0 && !bytes.Equal(u, last) {
					if err := take(); err != nil {
						return err
					}
					group = 0
				}
				last = append(last[:0], u...)
				lastRec = append(lastRec[:0], r.Value...)
				group++
			}
			if err := it.Err(); err != nil {
				return fmt.Errorf("loader: bulk load: reading the sorted records: %w", err)
			}
			if err := take(); err != nil {
				return err
			}
			if len(b.items) > 0 && !send(b) {
				return ctx.Err()
			}
			return nil
		}
		work := func(b *parsed) {
			b.pages = make([]*extract.Page, len(b.items))
			var next atomic.Int64
			var wg sync.WaitGroup
			for range min(l.opts.Concurrency, len(b.items)) {
				wg.Go(func() {
					for i := int(next.Add(1) - 1); i < len(b.items); i = int(next.Add(1) - 1) {
						it := &b.items[i]
						p, err := extract.ParseCanonical(it.url, bytes.NewReader(it.rec.Body), l.opts.MaxBody)
						if count {
							l.bulk.parsed.Add(1)
						}
						if err != nil {
							if count {
								l.bad(it.rec, it.rec.URL, err)
							}
							continue
						}
						b.pages[i] = p
					}
				})
			}
			wg.Wait()
		}
		errStop := errors.New("stopped by the consumer")
		finish := func(b *parsed) error {
			for _, p := range b.pages {
				if p == nil {
					continue
				}
				if count {
					l.bulk.pages.Add(1)
				}
				if !yield(p, nil) {
					return errStop
				}
			}
			return nil
		}
		if err := batchpipe.Run(ctx, produce, work, finish); err != nil && !errors.Is(err, errStop) {
			yield(nil, err)
		}
	}
}

// encodeRecord appends what a bulk run keeps of rec while it is sorted:
// whether it is a delete, where it came from (for reports) and its body.
func encodeRecord(b []byte, rec input.Record) []byte {
	var del byte
	if rec.Delete {
		del = 1
	}
	b = append(b, del)
	b = binary.AppendUvarint(b, uint64(len(rec.URL)))
	b = append(b, rec.URL...)
	b = binary.AppendUvarint(b, uint64(len(rec.Source)))
	b = append(b, rec.Source...)
	b = binary.AppendVarint(b, rec.Offset)
	b = binary.AppendVarint(b, int64(rec.Line))
	return append(b, rec.Body...)
}

// decodeRecord reads what encodeRecord wrote; the record's slices are
// its own.
func decodeRecord(b []byte) (input.Record, error) {
	bad := fmt.Errorf("loader: bulk load: a sorted record of %d bytes is corrupt", len(b))
	if len(b) < 1 {
		return input.Record{}, bad
	}
	rec := input.Record{Delete: b[0] == 1}
	b = b[1:]
	str := func() (string, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", false
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		return s, true
	}
	var ok1, ok2 bool
	rec.URL, ok1 = str()
	rec.Source, ok2 = str()
	off, k1 := binary.Varint(b)
	if k1 > 0 {
		b = b[k1:]
	}
	line, k2 := binary.Varint(b)
	if !ok1 || !ok2 || k1 <= 0 || k2 <= 0 {
		return input.Record{}, bad
	}
	rec.Offset, rec.Line = off, int(line)
	if !rec.Delete {
		rec.Body = bytes.Clone(b[k2:])
	}
	return rec, nil
}

// summary is the Summary of the run so far.
func (l *Loader) summary(began time.Time) Summary {
	s := Summary{Counts: l.c.snapshot(), Elapsed: time.Since(began)}
	if l.opts.Stats != nil {
		s.SkipReasons = maps.Clone(l.opts.Stats.Skipped)
	}
	l.mu.Lock()
	if len(l.badReasons) > 0 {
		s.BadReasons = maps.Clone(l.badReasons)
	}
	l.mu.Unlock()
	return s
}
