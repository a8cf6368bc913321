// Package combine turns updates to hot cells into appends that never
// collide, folded in later by a weak observer — the pattern of Fluo's
// CombineQueue.
//
// A counter that many observers update (the count of the word "the", the
// inbound link count of a popular page) is a collision hot spot: every
// transaction that increments it conflicts with every other one, and all but
// one retry. With a Queue, each update is written as its own cell
// (distinct cells never conflict) together with a weak notification; the
// queue's weak observer later reads the queued updates, combines them and
// deletes them, in one transaction. Updates are applied exactly once: a
// folding transaction deletes exactly the entries it read, and an entry
// queued meanwhile stays for the next run.
//
// Updates are folded in two steps, so that neither step collides:
//
//   - An update is queued in a row of its own per second of its writer's
//     start time (the value's row followed by a zero byte and the second).
//     A folded entry stays in its row, deleted, until garbage collection
//     removes it, and a fold steps over every one: in a single row, the
//     fold of a value updated a few hundred times a second would step over
//     every update since the last collection, some hundred thousand. A
//     row per second bounds that to one second's updates.
//   - The fold of a second's row combines its updates into one partial
//     update, written as a cell of its own in the value's row, and notifies
//     the value's row. Only the fold of the value's row writes the value:
//     it combines the partial updates into it. Folds of different seconds
//     of one value may run at once (a second's stragglers, a scanner
//     catching up); each writes its own partial cell, so they never
//     conflict with each other or with the value's fold, where folding
//     every second straight into the value made them collide on it.
package combine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/oracle"
)

// Func combines queued updates into a value. cur is nil if the cell has no
// value; returning a nil value deletes the cell.
//
// It must be associative: called with a nil cur on some of the updates,
// what it returns must be an update standing for all of them, or nil if
// they cancel out (a sum of zero). The fold of a second's row combines its
// updates that way before the value's fold combines those into the value.
type Func func(cur []byte, updates [][]byte) ([]byte, error)

// Config describes a queue.
type Config struct {
	// Name identifies the queue; its observer is named after it and its
	// entries live in the column family Name+".q" of Table.
	Name  string
	Table string
	// Value is the column the queue maintains.
	Value framework.Column
	// Combine folds updates into the value.
	Combine Func
}

// Queue queues updates to Value cells.
type Queue struct {
	cfg    Config
	family string
	// notify is the weak column of a value's own row: its fold combines
	// the partial updates of the value's seconds (and entries queued
	// before rows per second, which stores written then may still hold)
	// into the value. bucketNotify is that of a row per second.
	notify, bucketNotify framework.Column
}

// bucketMs is how much of its writers' start time one row of queued
// entries holds.
const bucketMs = 1000

// bucketSuffixLen is the length of what a row of queued entries adds to
// its value's row: a zero byte and the second, big-endian.
const bucketSuffixLen = 1 + 8

// partialPrefix starts the qualifier of a partial update in a value's row
// (followed by the start timestamp of the fold that wrote it, in hex); an
// entry's qualifier starts with a timestamp in hex, never with "p".
const partialPrefix = "p/"

// New returns a queue; Register its observer before use.
func New(cfg Config) (*Queue, error) {
	if cfg.Name == "" || cfg.Table == "" || cfg.Value.Family == "" || cfg.Combine == nil {
		return nil, errors.New("combine: Name, Table, Value and Combine are required")
	}
	fam := cfg.Name + ".q"
	return &Queue{cfg: cfg, family: fam,
		notify:       framework.Column{Family: fam, Qualifier: ""},
		bucketNotify: framework.Column{Family: fam, Qualifier: "s"},
	}, nil
}

// Register adds the queue's weak observer to reg.
func (q *Queue) Register(reg *framework.Registry) error {
	return reg.Register(framework.Observer{
		Name: q.cfg.Name, Table: q.cfg.Table, Columns: []framework.Column{q.notify, q.bucketNotify}, Kind: framework.Weak, Fn: q.fold,
	})
}

// Add queues update for row's value in tx. id must be unique among the
// updates tx queues for the same row (e.g. the source's row key). The
// entry goes to the row of the second of tx's start time (see the package
// comment).
func (q *Queue) Add(tx *framework.Txn, row []byte, id string, update []byte) error {
	start := tx.StartTs()
	bucket := make([]byte, 0, len(row)+bucketSuffixLen)
	bucket = append(append(bucket, row...), 0)
	bucket = binary.BigEndian.AppendUint64(bucket, uint64(oracle.PhysicalMillis(start)/bucketMs))
	entry := framework.Column{Family: q.family, Qualifier: fmt.Sprintf("%016x/%s", start, id)}
	if err := tx.Set(q.cfg.Table, bucket, entry, update); err != nil {
		return err
	}
	return tx.NotifyWeak(q.cfg.Table, bucket, q.bucketNotify)
}

// fold runs for a notification of a second's row (bucketNotify) or of a
// value's row (notify); see foldSecond and foldValue.
func (q *Queue) fold(ctx context.Context, tx *framework.Txn, row []byte, col framework.Column) error {
	if col == q.bucketNotify {
		return q.foldSecond(ctx, tx, row)
	}
	return q.foldValue(ctx, tx, row)
}

// foldSecond combines the updates queued in row, a second's row, into one
// partial update in its value's row, and notifies that row.
func (q *Queue) foldSecond(ctx context.Context, tx *framework.Txn, row []byte) error {
	if len(row) < bucketSuffixLen || row[len(row)-bucketSuffixLen] != 0 {
		return fmt.Errorf("combine %s: %q is not a row of queued entries", q.cfg.Name, row)
	}
	valueRow := row[:len(row)-bucketSuffixLen]
	updates, entries, err := q.queued(ctx, tx, row)
	if err != nil || len(updates) == 0 {
		return err
	}
	partial, err := q.cfg.Combine(nil, updates)
	if err != nil {
		return fmt.Errorf("combine %s: %w", q.cfg.Name, err)
	}
	if err := q.deleteAll(tx, row, entries); err != nil {
		return err
	}
	if partial == nil {
		return nil // the second's updates cancel out
	}
	// Named after this fold's start timestamp: unique, so that no other
	// fold writes the cell.
	cell := framework.Column{Family: q.family, Qualifier: fmt.Sprintf("%s%016x", partialPrefix, tx.StartTs())}
	if err := tx.Set(q.cfg.Table, valueRow, cell, partial); err != nil {
		return err
	}
	return tx.NotifyWeak(q.cfg.Table, valueRow, q.notify)
}

// foldValue combines what is queued in row, a value's row (partial
// updates, and entries queued there before rows per second), into the
// value.
func (q *Queue) foldValue(ctx context.Context, tx *framework.Txn, row []byte) error {
	updates, entries, err := q.queued(ctx, tx, row)
	if err != nil || len(updates) == 0 {
		return err
	}
	cur, err := tx.Get(ctx, q.cfg.Table, row, q.cfg.Value)
	if errors.Is(err, framework.ErrNotFound) {
		cur, err = nil, nil
	}
	if err != nil {
		return err
	}
	next, err := q.cfg.Combine(cur, updates)
	if err != nil {
		return fmt.Errorf("combine %s: %w", q.cfg.Name, err)
	}
	if next == nil {
		err = tx.Delete(q.cfg.Table, row, q.cfg.Value)
	} else {
		err = tx.Set(q.cfg.Table, row, q.cfg.Value, next)
	}
	if err != nil {
		return err
	}
	return q.deleteAll(tx, row, entries)
}

// queued reads the updates queued in row (not its notification columns),
// with their cells.
func (q *Queue) queued(ctx context.Context, tx *framework.Txn, row []byte) (updates [][]byte, entries []framework.Column, err error) {
	end := append(append([]byte(nil), row...), 0)
	for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: q.cfg.Table, Start: row, End: end, Families: []string{q.family}}) {
		if err != nil {
			return nil, nil, err
		}
		if e.Column == q.notify || e.Column == q.bucketNotify {
			continue
		}
		updates = append(updates, e.Value)
		entries = append(entries, e.Column)
	}
	return updates, entries, nil
}

// deleteAll deletes the cells cols of row.
func (q *Queue) deleteAll(tx *framework.Txn, row []byte, cols []framework.Column) error {
	for _, c := range cols {
		if err := tx.Delete(q.cfg.Table, row, c); err != nil {
			return err
		}
	}
	return nil
}

// SumInt adds decimal integer updates to a decimal integer value, deleting
// the value when the sum is zero.
func SumInt(cur []byte, updates [][]byte) ([]byte, error) {
	var sum int64
	if cur != nil {
		n, err := strconv.ParseInt(string(cur), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("value %q: %w", cur, err)
		}
		sum = n
	}
	for _, u := range updates {
		n, err := strconv.ParseInt(string(u), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("update %q: %w", u, err)
		}
		sum += n
	}
	if sum == 0 {
		return nil, nil
	}
	return strconv.AppendInt(nil, sum, 10), nil
}
