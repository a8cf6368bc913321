package tikvtest

import (
	"sync"
	"sync/atomic"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/tikv/client-go/v2/testutils"
	"github.com/tikv/client-go/v2/tikvrpc"
)

// maxTracked bounds the keys and transactions locks keeps; past it, it
// starts over (the mock then resolves the locks of the transactions it
// no longer knows its own way).
const maxTracked = 1 << 20

// locks resolves transactions' locks on the mock as TiKV does: by their
// keys. client-go's mock answers a ResolveLock request by reading its
// whole region, versions and all, under the mutex that serializes every
// request of the cluster, whether or not the request names the keys; TiKV
// reads the locks its request names, or its region's lock column family,
// which holds only the locks. On a mock region grown by a long run, a
// handful of resolutions then cost more than all the transactions around
// them, and the cost grows with the data: a benchmark measures the mock.
//
// So the cluster's clients note the keys each transaction prewrote
// (forgetting them as commits and rollbacks of them succeed), and a
// ResolveLock of one transaction is served by resolving each of those
// keys (or the ones the request names) in the mock's store, which reads
// only that key's versions and leaves a lock of another transaction
// alone, as TiKV does. A resolution of a transaction it does not know
// (one whose prewrites it did not see whole) is sent as it was.
type locks struct {
	mvcc testutils.MVCCStore

	mu sync.Mutex
	// keys maps the start timestamp of each transaction whose prewrites
	// were seen to the keys they may have locked that no commit or
	// rollback has resolved yet (empty once all are).
	keys map[uint64]map[string]struct{}
	n    int
	// top is the highest start timestamp of a prewrite seen; floor is
	// top when keys last started over: what is kept of transactions at
	// or below it may be partial.
	top, floor uint64
	// resolved counts the resolutions served by their keys.
	resolved atomic.Int64
}

// prewriting notes the keys of a prewrite about to be sent (which may
// lock them: the keys kept for a transaction are never fewer than its
// locks, or a resolution would leave some of them).
func (l *locks) prewriting(p *kvrpcpb.PrewriteRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n+len(p.Mutations)+1 > maxTracked {
		// Start over, no longer trusting what is kept of the
		// transactions seen so far: they may have prewritten more.
		l.keys, l.n = nil, 0
		l.floor = l.top
	}
	if l.keys == nil {
		l.keys = map[uint64]map[string]struct{}{}
	}
	l.top = max(l.top, p.StartVersion)
	ks := l.keys[p.StartVersion]
	if ks == nil {
		ks = map[string]struct{}{}
		l.keys[p.StartVersion] = ks
		l.n++
	}
	for _, m := range p.Mutations {
		if m.Op == kvrpcpb.Op_CheckNotExists {
			continue // locks nothing
		}
		if _, ok := ks[string(m.Key)]; !ok {
			ks[string(m.Key)] = struct{}{}
			l.n++
		}
	}
}

// answered forgets the keys a commit or rollback that succeeded resolved.
func (l *locks) answered(req *tikvrpc.Request, resp *tikvrpc.Response) {
	if !succeeded(resp) {
		return
	}
	switch req.Type {
	case tikvrpc.CmdCommit:
		l.forget(req.Commit().StartVersion, req.Commit().Keys)
	case tikvrpc.CmdBatchRollback:
		l.forget(req.BatchRollback().StartVersion, req.BatchRollback().Keys)
	}
}

// forget drops keys of the transaction at ts, keeping the transaction
// known.
func (l *locks) forget(ts uint64, keys [][]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ks := l.keys[ts]
	for _, k := range keys {
		if _, ok := ks[string(k)]; ok {
			delete(ks, string(k))
			l.n--
		}
	}
}

// resolve serves req, a ResolveLock, by resolving the transaction's keys
// one by one; ok is false if it cannot (a resolution of several
// transactions, a collection's, or one of a transaction it does not know
// whole), and the caller then sends req.
func (l *locks) resolve(req *tikvrpc.Request) (resp *tikvrpc.Response, ok bool) {
	r := req.ResolveLock()
	if len(r.TxnInfos) > 0 {
		return nil, false
	}
	keys := r.Keys
	if len(keys) == 0 {
		// Every key it may still lock, in whichever region: resolving
		// more than the request's region changes nothing, as every lock
		// of the transaction goes the same way.
		l.mu.Lock()
		ks, known := l.keys[r.StartVersion]
		if !known || r.StartVersion <= l.floor {
			l.mu.Unlock()
			return nil, false
		}
		for k := range ks {
			keys = append(keys, []byte(k))
		}
		l.mu.Unlock()
	}
	for _, k := range keys {
		if err := l.mvcc.ResolveLock(k, append(k[:len(k):len(k)], 0), r.StartVersion, r.CommitVersion); err != nil {
			return nil, false
		}
	}
	l.forget(r.StartVersion, keys)
	l.resolved.Add(1)
	return &tikvrpc.Response{Resp: &kvrpcpb.ResolveLockResponse{}}, true
}

// succeeded reports whether resp answers a commit or rollback that did
// what it asked.
func succeeded(resp *tikvrpc.Response) bool {
	if resp == nil || resp.Resp == nil {
		return false
	}
	if rerr, err := resp.GetRegionError(); err != nil || rerr != nil {
		return false
	}
	switch a := resp.Resp.(type) {
	case *kvrpcpb.CommitResponse:
		return a.Error == nil
	case *kvrpcpb.BatchRollbackResponse:
		return a.Error == nil
	}
	return false
}
