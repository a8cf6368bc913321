package tikvtest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/tikv/client-go/v2/testutils"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"
	"github.com/tikv/client-go/v2/util/codec"
)

// maxTrackedLocks bounds the keys locks tracks; past it, it starts over
// (the mock then resolves the locks it no longer knows of its own way).
const maxTrackedLocks = 1 << 20

// locks resolves transactions' locks on the mock as TiKV does: by their
// keys. client-go's mock answers a ResolveLock request by reading its
// whole region, versions and all, under the lock that serializes every
// request of the cluster, whether or not the request names the keys; TiKV
// reads the locks its request names, or its region's lock column family,
// which holds only the locks. On a mock region grown by a long run, a
// handful of resolutions then cost more than all the transactions around
// them, and the cost grows with the data: a benchmark measures the mock.
//
// So the cluster's clients note the keys each transaction prewrote
// (forgetting them as they are committed or rolled back), and a
// ResolveLock of one transaction is sent as the commit (or rollback) of
// its keys in the request's region, which the mock serves key by key with
// the same outcome. Anything else, or a translation the mock refuses (a
// key whose lock is gone, say), is sent as it was.
type locks struct {
	mock *testutils.MockCluster

	mu   sync.Mutex
	keys map[uint64]map[string]struct{} // start timestamp -> keys it prewrote, not yet resolved
	ttls map[uint64]uint64              // start timestamp -> its locks' TTL, for ScanLock (see scanLock)
	n    int
	// top is the highest start timestamp of a prewrite seen; floor is
	// top when the keys last started over: what is kept of transactions
	// at or below it may be partial.
	top, floor uint64
	// resolved counts the resolutions sent by their keys.
	resolved atomic.Int64
}

// prewriting notes the keys of a prewrite about to be sent (which may
// lock them: the keys kept for a transaction are never fewer than its
// locks, or a resolution that named too few would report a region
// resolved with locks left in it).
func (l *locks) prewriting(p *kvrpcpb.PrewriteRequest) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n+len(p.Mutations) > maxTrackedLocks {
		// Start over, no longer trusting what is kept of the
		// transactions seen so far: they may have prewritten more.
		l.keys, l.ttls, l.n = nil, nil, 0
		l.floor = l.top
	}
	if l.keys == nil {
		l.keys, l.ttls = map[uint64]map[string]struct{}{}, map[uint64]uint64{}
	}
	l.ttls[p.StartVersion] = max(l.ttls[p.StartVersion], p.LockTtl)
	l.top = max(l.top, p.StartVersion)
	ks := l.keys[p.StartVersion]
	if ks == nil {
		ks = map[string]struct{}{}
		l.keys[p.StartVersion] = ks
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

// forget drops keys of the transaction at ts.
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
	if ks != nil && len(ks) == 0 {
		delete(l.keys, ts)
		delete(l.ttls, ts)
	}
}

// inRegion returns the keys of the transaction at ts that req's region
// holds: the request's own if it names them, else those the transaction
// prewrote and has not resolved.
func (l *locks) inRegion(req *tikvrpc.Request, r *kvrpcpb.ResolveLockRequest) [][]byte {
	keys, _ := l.keysInRegion(req, r)
	return keys
}

// keysInRegion is inRegion, reporting too whether the keys are known to be
// all the transaction's locks in the region: not if it is older than
// what is kept (see floor).
func (l *locks) keysInRegion(req *tikvrpc.Request, r *kvrpcpb.ResolveLockRequest) (_ [][]byte, known bool) {
	if len(r.Keys) > 0 {
		return r.Keys, true
	}
	l.mu.Lock()
	if r.StartVersion <= l.floor {
		l.mu.Unlock()
		return nil, false
	}
	var keys [][]byte
	for k := range l.keys[r.StartVersion] {
		keys = append(keys, []byte(k))
	}
	l.mu.Unlock()
	out := keys[:0]
	for _, k := range keys {
		if region, _, _, _ := l.mock.GetRegionByKey(codec.EncodeBytes(nil, k)); region != nil && region.GetId() == req.RegionId {
			out = append(out, k)
		}
	}
	return out, true
}

// resolve sends req, a ResolveLock of one transaction, as the commit or
// rollback of its keys in the request's region; ok is false if it could
// not (the caller then sends req itself).
func (l *locks) resolve(ctx context.Context, next tikvclient.Client, addr string, req *tikvrpc.Request, timeout time.Duration) (resp *tikvrpc.Response, ok bool) {
	r := req.ResolveLock()
	if len(r.TxnInfos) > 0 {
		return nil, false
	}
	keys, known := l.keysInRegion(req, r)
	switch {
	case len(keys) == 0 && known:
		// The transaction has no lock left in the region: TiKV finds
		// none in its lock column family and answers at once, where the
		// mock would read the whole region to find none.
		l.resolved.Add(1)
		return &tikvrpc.Response{Resp: &kvrpcpb.ResolveLockResponse{}}, true
	case len(keys) == 0:
		return nil, false
	}
	var sent *tikvrpc.Request
	if r.CommitVersion > 0 {
		sent = tikvrpc.NewRequest(tikvrpc.CmdCommit, &kvrpcpb.CommitRequest{StartVersion: r.StartVersion, Keys: keys, CommitVersion: r.CommitVersion}, req.Context)
	} else {
		sent = tikvrpc.NewRequest(tikvrpc.CmdBatchRollback, &kvrpcpb.BatchRollbackRequest{StartVersion: r.StartVersion, Keys: keys}, req.Context)
	}
	got, err := next.SendRequest(ctx, addr, sent, timeout)
	if err != nil || !succeeded(got) {
		return nil, false
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
