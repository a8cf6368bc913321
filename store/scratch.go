package store

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// scratch is the reusable working memory of one ReadRow or Apply: the cursor
// and iterator options (which would otherwise escape to the heap on every
// call) and key and value buffers. Nothing in it outlives the operation;
// results are copied out into memory the caller owns.
type scratch struct {
	cur    cursor
	opts   pebble.IterOptions
	prefix []byte // row or column prefix
	upper  []byte // iterator upper bound
	target []byte // seek target
	key    []byte // key of a mutation
	vals   []byte // values read so far, see cellRef
	refs   []cellRef
	// safePoint is the safe point the batch being built writes (see
	// DB.safePointWritten), 0 if none.
	safePoint uint64
}

// cellRef is a cell read into scratch: the index of its column, its
// timestamp and the end of its value in scratch.vals.
type cellRef struct {
	col    int
	ts     uint64
	valEnd int
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxScratchBuf is the largest buffer kept when a scratch goes back to the
// pool, so that one huge read does not pin its memory forever.
const maxScratchBuf = 64 << 10

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

func putScratch(s *scratch) {
	s.cur.it = nil
	s.opts = pebble.IterOptions{}
	s.safePoint = 0
	if cap(s.vals) > maxScratchBuf {
		s.vals = nil
	}
	if cap(s.refs) > maxScratchBuf/16 {
		s.refs = nil
	}
	scratchPool.Put(s)
}
