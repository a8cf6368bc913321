package tikvengine

import (
	"bytes"
	"context"
	"slices"
	"sync"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/store"
)

// Prefetching, as Percolator does it: an observer's run mostly reads the
// same cells as its last runs did, such as other columns of the row it was
// notified of, or one fixed cell every run reads. Each is a TiKV request
// when read with Get. The engine learns, per observer, which cells its
// runs read (as a column of the notified row, or as a fixed cell), and
// Claim reads the ones most runs read in the same batched request as the
// observer's ack, which fills the run's snapshot cache: the observer's
// Gets of them are then answered without a request. A wrong guess costs
// the bytes of a cell read for nothing, never a wrong read: the cache
// holds the snapshot's values, and the transaction's own writes still
// come first.

// Bounds of what the predictor keeps.
const (
	// prefetchMin is how many runs of an observer it sees before it
	// predicts anything.
	prefetchMin = 4
	// prefetchCells bounds the cells one observer's profile counts and
	// one Claim prefetches.
	prefetchCells = 32
	// prefetchWindow is the number of runs after which the counts are
	// halved, so that a profile follows an observer whose reads change.
	prefetchWindow = 1024
)

// runReads is what a run's transaction records of its reads.
type runReads struct {
	observer string
	table    string
	row      []byte
	// read holds the cells read, each described as relative (a column of
	// the notified row) or absolute (a key).
	read map[string]struct{}
}

// noteRead records a read of (table, row, col) in a run.
func (r *runReads) noteRead(c codec, table string, row []byte, col store.Column) {
	if r == nil || len(r.read) >= prefetchCells {
		return
	}
	var d string
	if table == r.table && bytes.Equal(row, r.row) {
		d = "r" + string(c.columnSuffix(col))
	} else {
		d = "a" + string(c.dataKey(table, row, col))
	}
	if r.read == nil {
		r.read = map[string]struct{}{}
	}
	r.read[d] = struct{}{}
}

// predictor keeps, per observer, how many of its runs read each cell.
type predictor struct {
	mu       sync.Mutex
	profiles map[string]*profile
}

type profile struct {
	runs  int
	reads map[string]int
}

// learn counts the reads of a finished run.
func (p *predictor) learn(r *runReads) {
	if r == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.profiles == nil {
		p.profiles = map[string]*profile{}
	}
	pr := p.profiles[r.observer]
	if pr == nil {
		pr = &profile{reads: map[string]int{}}
		p.profiles[r.observer] = pr
	}
	pr.runs++
	for d := range r.read {
		if _, ok := pr.reads[d]; ok || len(pr.reads) < prefetchCells {
			pr.reads[d]++
		}
	}
	if pr.runs >= prefetchWindow {
		pr.runs /= 2
		for d, n := range pr.reads {
			if n /= 2; n == 0 {
				delete(pr.reads, d)
			} else {
				pr.reads[d] = n
			}
		}
	}
}

// predict returns the keys of the cells at least half of observer's runs
// read, for a run notified of (table, row).
func (p *predictor) predict(c codec, observer, table string, row []byte) [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr := p.profiles[observer]
	if pr == nil || pr.runs < prefetchMin {
		return nil
	}
	var out [][]byte
	for d, n := range pr.reads {
		if 2*n < pr.runs {
			continue
		}
		if d[0] == 'r' {
			out = append(out, append(c.rowPrefix(table, row), d[1:]...))
		} else {
			out = append(out, []byte(d[1:]))
		}
	}
	return out
}

// weakClaim is Claim for a weak observer: it reads, in one request, the
// notification keys p holds and what the observer's runs are expected to
// read (into the run's snapshot cache). It reports whether the run should
// go ahead: not if none of p's keys is left in the run's snapshot, where
// another run removed them with its commit, having seen every write they
// announce (its Pending read them before its snapshot) — as when p came
// from this process's own commits while another runner took the work.
func (tx *Txn) weakClaim(ctx context.Context, observer string, p *engine.Pending, pkeys [][]byte) (bool, error) {
	ks := append(slices.Clip(pkeys), tx.db.predict.predict(tx.db.codec, observer, p.Table, p.Row)...)
	got, err := tx.txn.GetSnapshot().BatchGet(ctx, ks)
	if err != nil {
		return false, failIn(ctx, "claiming "+p.Notification.String()+" for "+observer, err)
	}
	for _, k := range pkeys {
		if _, ok := got[string(k)]; ok {
			return true, nil
		}
	}
	return false, nil
}
