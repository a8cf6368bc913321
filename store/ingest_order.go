package store

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"

	"github.com/trickle-dev/trickle/internal/keys"
)

// errOutOfOrder stops writeInOrder: a key of the request did not follow
// the one before it in its table and locality group.
var errOutOfOrder = errors.New("store: ingest request out of key order")

// inOrderPart is how many mutations, at least, each core writes in order.
const inOrderPart = 32768

// writeInOrder writes the n mutations of txns into sstables as it encodes
// them, with no sort: each of a few ranges of the request on a core of
// its own, each table of each locality group of a range into files of
// their own. It needs the rows of each table in key order, as an import
// passes them (a row's mutations may come in any order, in adjacent row
// transactions: a row is sorted alone), and fails with errOutOfOrder,
// returning the files it made, if they are not, or if a version is
// written twice. The files of two ranges do not overlap, since each range
// follows the one before.
//
// An import's chunk was encoded whole, sorted and then written: the
// encoded keys alone were tens of MB a chunk, and fresh memory for them
// cost page faults and collections (with assists that held up the
// writing) more than the encoding.
func (db *DB) writeInOrder(ctx context.Context, txns []*RowTxn, n int) ([]string, error) {
	parts := max(1, min(runtime.GOMAXPROCS(0), n/inOrderPart))
	// Ranges of about n/parts mutations each, ending between rows.
	bounds := make([]int, 0, parts+1)
	bounds = append(bounds, 0)
	seen := 0
	for i, txn := range txns {
		seen += len(txn.Mutations)
		if len(bounds) < parts && seen >= len(bounds)*n/parts && (i+1 == len(txns) || !sameRow(txn, txns[i+1])) {
			bounds = append(bounds, i+1)
		}
	}
	bounds = append(bounds, len(txns))
	ranges := make([]inOrderRange, len(bounds)-1)
	var wg sync.WaitGroup
	for r := range ranges {
		wg.Go(func() { ranges[r] = db.writeRange(ctx, txns[bounds[r]:bounds[r+1]]) })
	}
	wg.Wait()
	var paths []string
	var errs []error
	for _, r := range ranges {
		paths = append(paths, r.paths...)
		errs = append(errs, r.err)
	}
	if err := errors.Join(errs...); err != nil {
		return paths, err
	}
	// Each range must start, in each table of each group, after the
	// ranges before it end there.
	last := map[stream][]byte{}
	for _, r := range ranges {
		for s, first := range r.first {
			if l, ok := last[s]; ok && bytes.Compare(l, first) >= 0 {
				return paths, errOutOfOrder
			}
		}
		for s, l := range r.last {
			last[s] = l
		}
	}
	return paths, nil
}

// sameRow reports whether a and b write the same row.
func sameRow(a, b *RowTxn) bool { return a.Table == b.Table && bytes.Equal(a.Row, b.Row) }

// stream is a table of a locality group: the keys writeInOrder writes
// in order, into files of their own.
type stream struct {
	group keys.Group
	table string
}

// inOrderRange is what writeRange did with a range of a request: the
// files it wrote, the first and last key it wrote in each stream, and its
// error.
type inOrderRange struct {
	paths       []string
	first, last map[stream][]byte
	err         error
}

// writeRange writes txns, one stream at a time, as writeInOrder does.
func (db *DB) writeRange(ctx context.Context, txns []*RowTxn) inOrderRange {
	r := inOrderRange{first: map[stream][]byte{}, last: map[stream][]byte{}}
	var streams []stream
	for _, txn := range txns {
		for j := range txn.Mutations {
			if s := (stream{db.layout.GroupOf(txn.Mutations[j].Column.Family), txn.Table}); !slices.Contains(streams, s) {
				streams = append(streams, s)
			}
		}
	}
	var row rowKeys
	for _, s := range streams {
		// last is a copy of the last key of the rows written so far: the
		// keys of a row are compared with the one before them in place.
		var last []byte
		outOfOrder := false
		paths, err := db.writeSSTables(ctx, func(yield func(key, value []byte) bool) {
			for i := 0; i < len(txns); {
				j := i + 1
				for j < len(txns) && sameRow(txns[i], txns[j]) {
					j++
				}
				if txns[i].Table != s.table {
					i = j
					continue
				}
				row.encode(db, txns[i:j], s.group)
				i = j
				if len(row.kvs) == 0 {
					continue
				}
				if last == nil {
					r.first[s] = bytes.Clone(row.kvs[0].key)
				}
				prev := last
				for _, e := range row.kvs {
					if prev != nil && bytes.Compare(prev, e.key) >= 0 {
						outOfOrder = true
						return
					}
					prev = e.key
					if !yield(e.key, e.value) {
						return
					}
				}
				last = append(last[:0], prev...)
			}
		})
		r.paths = append(r.paths, paths...)
		r.last[s] = last
		switch {
		case err != nil:
			r.err = err
			return r
		case outOfOrder:
			r.err = errOutOfOrder
			return r
		}
	}
	return r
}

// rowKeys are the encoded keys of a row's mutations in one locality
// group, sorted: memory reused from row to row.
type rowKeys struct {
	arena []byte
	ends  []int // of each key in arena
	kvs   []kv
}

// encode fills k with the mutations in group g of txns, row transactions
// of one row.
func (k *rowKeys) encode(db *DB, txns []*RowTxn, g keys.Group) {
	k.arena, k.ends, k.kvs = k.arena[:0], k.ends[:0], k.kvs[:0]
	for _, txn := range txns {
		for j := range txn.Mutations {
			mu := &txn.Mutations[j]
			if db.layout.GroupOf(mu.Column.Family) != g {
				continue
			}
			k.arena = appendMutationKey(k.arena, g, txn, mu, mu.Ts)
			k.ends = append(k.ends, len(k.arena))
			k.kvs = append(k.kvs, kv{value: mu.Value})
		}
	}
	// The keys are sliced once the arena stops growing.
	off := 0
	for i, end := range k.ends {
		k.kvs[i].key = k.arena[off:end:end]
		off = end
	}
	sortKVs(k.kvs)
}
