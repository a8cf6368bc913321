package export

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/trickle-dev/trickle/framework"
)

// drain is the queue's observer: it exports one batch of the bucket row's
// entries to the sink and deletes them, in the observer's transaction, so
// that they leave the queue only if the sink took them and the deletion
// commits. A batch that stops short of the bucket's end records the last
// entry it took (afterColumn) and notifies the bucket again: the next
// drain's scan starts after it (a seek, ScanOptions.After), so that it
// neither steps again over the entries deleted before it, which stay
// until garbage collection, nor lets a key early in the bucket that keeps
// being updated hold back the keys after it. A drain that started after
// such a cursor and reached the bucket's end removes it and notifies the
// bucket once more, so that the entries added meanwhile before the cursor
// are taken by a drain from the start: a bucket with a backlog of N
// entries is read once through, not N/BatchSize times.
func (q *Queue) drain(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	bucket, ok := q.parseBucketRow(row)
	if !ok {
		return fmt.Errorf("%w: %q is not a bucket of queue %s", ErrCorrupt, row, q.opts.Name)
	}
	after, seek, err := tx.Lookup(ctx, q.opts.Table, row, afterColumn)
	if err != nil {
		return err
	}
	// A cursor of an earlier release: the first entry left, reached by
	// stepping over those before it.
	next, resume, err := tx.Lookup(ctx, q.opts.Table, row, nextColumn)
	if err != nil {
		return err
	}
	var (
		batch    []Entry
		cells    []framework.Column
		size     int
		stopped  bool // entries after the batch were left for the next drain
		skipped  bool // entries before next were left for the next drain
		scanOpts = framework.ScanOptions{Table: q.opts.Table, Start: row, End: append(bytes.Clone(row), 0), Families: []string{entryFamily}}
	)
	if seek {
		scanOpts.After = &framework.Position{Row: row, Column: framework.Column{Family: entryFamily, Qualifier: string(after)}}
	}
	for c, err := range tx.Scan(ctx, scanOpts) {
		if err != nil {
			return err
		}
		qual := c.Column.Qualifier
		if resume && qual < string(next) {
			skipped = true
			continue
		}
		n := len(qual) + len(c.Value)
		if len(batch) == q.opts.BatchSize || (len(batch) > 0 && size+n > q.opts.BatchBytes) {
			stopped = true
			break
		}
		e, err := decodeEntry(c.Column, c.Value)
		if err != nil {
			return fmt.Errorf("export %s bucket %d: %w", q.opts.Name, bucket, err)
		}
		batch = append(batch, e)
		cells = append(cells, c.Column)
		size += n
	}
	if len(batch) > 0 {
		began := time.Now()
		err := q.opts.Sink.Export(ctx, q.opts.Name, batch)
		q.metrics.batch(ctx, len(batch), err, time.Since(began))
		if err != nil {
			return fmt.Errorf("%w: queue %s, bucket %d, %d entries from %s: %w", ErrSink, q.opts.Name, bucket, len(batch), batch[0], err)
		}
		for _, c := range cells {
			if err := tx.Delete(q.opts.Table, row, c); err != nil {
				return err
			}
		}
	}
	if resume {
		if err := tx.Delete(q.opts.Table, row, nextColumn); err != nil {
			return err
		}
	}
	switch {
	case stopped:
		if err := tx.Set(q.opts.Table, row, afterColumn, []byte(cells[len(cells)-1].Qualifier)); err != nil {
			return err
		}
		return tx.NotifyWeak(q.opts.Table, row, q.notify)
	case seek:
		if err := tx.Delete(q.opts.Table, row, afterColumn); err != nil {
			return err
		}
		return tx.NotifyWeak(q.opts.Table, row, q.notify)
	case skipped:
		return tx.NotifyWeak(q.opts.Table, row, q.notify)
	}
	return nil
}

// parseBucketRow returns the bucket whose row row is, and false if row is
// none of this queue's.
func (q *Queue) parseBucketRow(row []byte) (int, bool) {
	n := len(q.opts.Name)
	if len(row) != n+3 || string(row[:n]) != q.opts.Name || row[n] != 0 {
		return 0, false
	}
	b := int(binary.BigEndian.Uint16(row[n+1:]))
	return b, b < q.opts.Buckets
}
