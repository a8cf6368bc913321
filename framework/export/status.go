package export

import (
	"context"
	"time"

	"github.com/trickle-dev/trickle/framework"
)

// Status is what a queue holds: the entries not exported yet.
type Status struct {
	// Queue and Observer name the queue and its observer (whose failures,
	// if the sink fails, are listed under this name).
	Queue, Observer string
	// Entries counts the entries waiting, Tombstones those of them that
	// are deletions, Bytes their keys' and values' size.
	Entries, Tombstones int
	Bytes               int64
	// OldestSeq is the smallest sequence number waiting (0 if none), and
	// Oldest when the oracle handed it out: how far behind the sink is.
	OldestSeq uint64
	Oldest    time.Time
}

// Status counts the queue's waiting entries in one snapshot of db. It
// reads every bucket, the deleted entries not collected yet included, so
// it is for status pages and tools, not for every request.
func (q *Queue) Status(ctx context.Context, db *framework.DB) (Status, error) {
	s := Status{Queue: q.opts.Name, Observer: q.Observer()}
	prefix := append([]byte(q.opts.Name), 0)
	err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		s.Entries, s.Tombstones, s.Bytes, s.OldestSeq = 0, 0, 0, 0
		for c, err := range tx.Scan(ctx, framework.ScanOptions{Table: q.opts.Table, Prefix: prefix, Families: []string{entryFamily}}) {
			if err != nil {
				return err
			}
			e, err := decodeEntry(c.Column, c.Value)
			if err != nil {
				return err
			}
			s.Entries++
			s.Bytes += int64(len(e.Key) + len(e.Value))
			if e.Delete {
				s.Tombstones++
			}
			if s.OldestSeq == 0 || e.Seq < s.OldestSeq {
				s.OldestSeq = e.Seq
			}
		}
		return nil
	})
	if s.OldestSeq != 0 {
		s.Oldest = framework.TimeOf(s.OldestSeq)
	}
	return s, err
}
