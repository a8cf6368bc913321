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
// commits. A batch that stops short of the bucket's end records where
// (nextColumn) and notifies the bucket again: the next drain starts
// there, so that a key early in the bucket that keeps being updated does
// not hold back the keys after it, and wraps around to the start once it
// reached the end.
func (q *Queue) drain(ctx context.Context, tx *framework.Txn, row []byte, _ framework.Column) error {
	bucket, ok := q.parseBucketRow(row)
	if !ok {
		return fmt.Errorf("%w: %q is not a bucket of queue %s", ErrCorrupt, row, q.opts.Name)
	}
	next, resume, err := tx.Lookup(ctx, q.opts.Table, row, nextColumn)
	if err != nil {
		return err
	}
	var (
		batch   []Entry
		cells   []framework.Column
		size    int
		stopAt  string // the first entry left for the next drain
		skipped bool   // entries before next were left for the next drain
	)
	end := append(bytes.Clone(row), 0)
	for c, err := range tx.Scan(ctx, framework.ScanOptions{Table: q.opts.Table, Start: row, End: end, Families: []string{entryFamily}}) {
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
			stopAt = qual
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
	switch {
	case stopAt != "":
		if err := tx.Set(q.opts.Table, row, nextColumn, []byte(stopAt)); err != nil {
			return err
		}
		return tx.NotifyWeak(q.opts.Table, row, q.notify)
	case resume:
		if err := tx.Delete(q.opts.Table, row, nextColumn); err != nil {
			return err
		}
		if skipped {
			return tx.NotifyWeak(q.opts.Table, row, q.notify)
		}
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
