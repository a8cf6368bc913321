package tikvtest

import (
	"bytes"
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/tikv/client-go/v2/testutils"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"
)

// commits has the mock commit transactions the way TiKV does, where
// client-go's mock falls back to two phases: it answers a prewrite that
// asks for async commit or one-phase commit as an ordinary one (no
// MinCommitTs, no OnePcCommitTs), does not serve CheckSecondaryLocks, and
// knows nothing of async-commit locks, so the client commits every
// transaction in two phases and the paths TiKV's clients take (and their
// lock resolution) never run. The cluster serves those requests itself,
// on top of the mock's MVCC store, following TiKV's design:
//
//   - max_ts is the highest timestamp a read (Get, BatchGet, Scan,
//     ScanLock) or a CheckTxnStatus has served. TiKV keeps it per region
//     (its concurrency manager); the cluster keeps one for all regions, a
//     conservative simplification: a commit timestamp may come out higher
//     than TiKV's, never lower.
//   - A prewrite with UseAsyncCommit writes its locks (the mock's
//     prewrite) and computes each lock's min_commit_ts = max(start_ts+1,
//     the request's MinCommitTs, max_ts+1), which it answers as
//     MinCommitTs; it keeps, beside the mock's locks, each lock's
//     min_commit_ts and, on the primary, the transaction's secondaries.
//     If that exceeds the request's MaxCommitTs it writes ordinary locks
//     and answers MinCommitTs 0, and the client falls back, as TiKV has it.
//   - A prewrite with TryOnePc (onepc.go) checks and writes as a prewrite
//     does, then commits at once, at max(start_ts+1, the request's
//     MinCommitTs, max_ts+1), and answers OnePcCommitTs.
//   - A read at T first raises max_ts to T. A read that meets an
//     async-commit lock whose min_commit_ts is above T reads past it (its
//     transaction cannot commit at or below T); any other async-commit
//     lock it reports with UseAsyncCommit, MinCommitTs and (on the
//     primary) Secondaries, so that the client resolves it the async way.
//   - CheckTxnStatus of an async-commit primary reports the lock (its TTL
//     and its LockInfo) instead of pushing or rolling it back, unless the
//     caller forces a synchronous commit; CheckSecondaryLocks reports each
//     key's lock of the transaction, or its commit, or rolls the key back
//     (writing a rollback record, so that a late prewrite fails) and
//     reports that.
//   - Commit and ResolveLock requests go to the mock (and resolve.go's
//     resolution by keys) as they are; a commit below a lock's
//     min_commit_ts fails with CommitTsExpired, as in TiKV.
//
// A prewrite's reading of max_ts and its writing of the locks must be one
// step with respect to reads of those keys: else a read at T could raise
// max_ts just after the prewrite read it, miss the locks not yet written,
// and the transaction commit at or below T, under the read's feet. TiKV
// makes it one step with its in-memory lock table; the cluster with mu:
// requests that write (prewrites, commits, rollbacks, resolutions, status
// checks) hold it exclusively, reads share it. The mock serializes its
// writes under one mutex anyway, so this costs little concurrency.
type commits struct {
	// on is false for a cluster that commits as client-go's mock does
	// (Options.TwoPhaseOnly): every request goes to the mock as it is.
	on   bool
	mvcc interface {
		Commit(keys [][]byte, startTS, commitTS uint64) error
		Rollback(keys [][]byte, startTS uint64) error
	}
	rec records

	mu    sync.RWMutex
	maxTS atomic.Uint64
	// async holds the async-commit locks' own data, by key, and txns
	// their keys, by start timestamp; an entry may outlive its lock
	// (pruned when its transaction is next acted on), so it counts only
	// while the mock holds a lock of its start timestamp on its key.
	async      map[string]*asyncLock
	txns       map[uint64]map[string]struct{}
	overlapped map[txnKey]struct{}

	stats struct {
		asyncPrewrites, onePC, fallbacks, readPast, asyncStatus, secondaryChecks, overlapped atomic.Int64
	}
}

// asyncLock is what TiKV keeps in an async-commit lock and the mock's
// lock lacks.
type asyncLock struct {
	startTS, minCommitTS, ttl, txnSize uint64
	op                                 kvrpcpb.Op
	primary                            []byte
	secondaries                        [][]byte // on the primary only
}

func (a *asyncLock) info(key []byte) *kvrpcpb.LockInfo {
	l := &kvrpcpb.LockInfo{
		Key:            key,
		PrimaryLock:    a.primary,
		LockVersion:    a.startTS,
		LockTtl:        a.ttl,
		TxnSize:        a.txnSize,
		LockType:       a.op,
		UseAsyncCommit: true,
		MinCommitTs:    a.minCommitTS,
	}
	if bytes.Equal(key, a.primary) {
		l.Secondaries = a.secondaries
	}
	return l
}

// observe raises max_ts to ts (a timestamp of a read or a check).
func (m *commits) observe(ts uint64) {
	if ts == 0 || ts == math.MaxUint64 {
		return // a read of the latest versions promises no snapshot
	}
	for {
		cur := m.maxTS.Load()
		if ts <= cur || m.maxTS.CompareAndSwap(cur, ts) {
			return
		}
	}
}

// lockOf returns the async-commit data of the lock of the transaction at
// ts on key, nil if the mock holds no such lock or it is not one. The
// caller holds m.mu, shared or not.
func (m *commits) lockOf(key []byte, ts uint64) *asyncLock {
	a := m.async[string(key)]
	if a == nil || a.startTS != ts {
		return nil
	}
	return a
}

// note keeps the async-commit data of a lock just written. The caller
// holds m.mu.
func (m *commits) note(key []byte, a *asyncLock) {
	if old := m.async[string(key)]; old != nil && old.startTS == a.startTS {
		a.minCommitTS = max(a.minCommitTS, old.minCommitTS) // a retried prewrite
	} else if old != nil {
		m.drop(key, old.startTS)
	}
	m.async[string(key)] = a
	ks := m.txns[a.startTS]
	if ks == nil {
		ks = map[string]struct{}{}
		m.txns[a.startTS] = ks
	}
	ks[string(key)] = struct{}{}
}

func (m *commits) drop(key []byte, ts uint64) {
	if a := m.async[string(key)]; a != nil && a.startTS == ts {
		delete(m.async, string(key))
	}
	if ks := m.txns[ts]; ks != nil {
		delete(ks, string(key))
		if len(ks) == 0 {
			delete(m.txns, ts)
		}
	}
}

// prune drops the data of the transaction at ts's async-commit locks
// that the mock no longer holds. The caller holds m.mu.
func (m *commits) prune(ts uint64) {
	for k := range m.txns[ts] {
		if start, ok := m.rec.lockOn([]byte(k)); !ok || start != ts {
			m.drop([]byte(k), ts)
		}
	}
}

// serve sends req to the mock (next), serving what the mock does not as
// TiKV would (see commits).
func (c *Cluster) serve(ctx context.Context, next tikvclient.Client, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	m := &c.commits
	if !m.on {
		switch req.Type {
		case tikvrpc.CmdPrewrite:
			c.locks.prewriting(req.Prewrite())
		case tikvrpc.CmdScanLock:
			if resp, ok := c.locks.scanLock(c.mvcc, req); ok {
				return resp, nil
			}
		case tikvrpc.CmdResolveLock:
			if resp, ok := c.locks.resolve(ctx, next, addr, req, timeout); ok {
				return resp, nil
			}
		}
		resp, err := next.SendRequest(ctx, addr, req, timeout)
		if err == nil {
			c.locks.answered(req, resp)
		}
		return resp, err
	}
	switch req.Type {
	case tikvrpc.CmdGet, tikvrpc.CmdBatchGet, tikvrpc.CmdScan:
		return m.read(ctx, next, addr, req, timeout)
	case tikvrpc.CmdScanLock:
		m.mu.RLock()
		defer m.mu.RUnlock()
		m.observe(req.ScanLock().MaxVersion)
		if resp, ok := c.locks.scanLock(c.mvcc, req); ok {
			return resp, nil
		}
		return next.SendRequest(ctx, addr, req, timeout)
	case tikvrpc.CmdPrewrite, tikvrpc.CmdCommit, tikvrpc.CmdBatchRollback, tikvrpc.CmdCleanup,
		tikvrpc.CmdCheckTxnStatus, tikvrpc.CmdCheckSecondaryLocks, tikvrpc.CmdResolveLock, tikvrpc.CmdTxnHeartBeat:
	default:
		return next.SendRequest(ctx, addr, req, timeout)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var resp *tikvrpc.Response
	var err error
	switch req.Type {
	case tikvrpc.CmdPrewrite:
		c.locks.prewriting(req.Prewrite())
		resp, err = m.prewrite(ctx, next, addr, req, timeout)
		if err == nil && resp != nil {
			if p, ok := resp.Resp.(*kvrpcpb.PrewriteResponse); ok && p.OnePcCommitTs != 0 {
				c.locks.forget(req.Prewrite().StartVersion, mutationKeys(req.Prewrite()))
			}
		}
		return resp, err
	case tikvrpc.CmdCommit:
		resp, err = m.commit(ctx, next, addr, req, timeout)
	case tikvrpc.CmdBatchRollback:
		r := req.BatchRollback()
		sh := m.rollingBack(r.Keys, r.StartVersion)
		resp, err = next.SendRequest(ctx, addr, req, timeout)
		m.rolledBack(sh)
		m.prune(r.StartVersion)
	case tikvrpc.CmdCleanup:
		r := req.Cleanup()
		sh := m.rollingBack([][]byte{r.Key}, r.StartVersion)
		resp, err = next.SendRequest(ctx, addr, req, timeout)
		m.rolledBack(sh)
		m.prune(r.StartVersion)
	case tikvrpc.CmdCheckTxnStatus:
		return m.checkTxnStatus(ctx, next, addr, req, timeout)
	case tikvrpc.CmdCheckSecondaryLocks:
		return m.checkSecondaryLocks(req.CheckSecondaryLocks()), nil
	case tikvrpc.CmdResolveLock:
		return m.resolveLock(ctx, &c.locks, next, addr, req, timeout)
	case tikvrpc.CmdTxnHeartBeat:
		r := req.TxnHeartBeat()
		resp, err = next.SendRequest(ctx, addr, req, timeout)
		if err == nil && resp != nil {
			if h, ok := resp.Resp.(*kvrpcpb.TxnHeartBeatResponse); ok && h.Error == nil {
				if a := m.lockOf(r.PrimaryLock, r.StartVersion); a != nil && h.LockTtl > a.ttl {
					a.ttl = h.LockTtl
				}
			}
		}
		return resp, err
	}
	if err == nil {
		c.locks.answered(req, resp)
	}
	return resp, err
}

// mutationKeys returns the keys a prewrite locks.
func mutationKeys(p *kvrpcpb.PrewriteRequest) [][]byte {
	keys := make([][]byte, 0, len(p.Mutations))
	for _, mu := range p.Mutations {
		if mu.Op != kvrpcpb.Op_CheckNotExists {
			keys = append(keys, mu.Key)
		}
	}
	return keys
}

// prewrite serves a prewrite: an async-commit one as TiKV does, a
// one-phase one by onePhase, any other as the mock does. The caller holds
// m.mu.
func (m *commits) prewrite(ctx context.Context, next tikvclient.Client, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	p := req.Prewrite()
	for _, mu := range p.Mutations {
		if m.rolledBackOver(mu.Key, p.StartVersion) {
			// As TiKV answers a prewrite that meets its own rollback.
			return &tikvrpc.Response{Resp: &kvrpcpb.PrewriteResponse{Errors: []*kvrpcpb.KeyError{{
				Abort: "txn already rolled back on key " + string(mu.Key),
			}}}}, nil
		}
	}
	if !p.UseAsyncCommit && !p.TryOnePc {
		return next.SendRequest(ctx, addr, req, timeout)
	}
	minCommit := max(p.StartVersion+1, p.MinCommitTs, m.maxTS.Load()+1)
	sent := *p
	if p.MaxCommitTs > 0 && minCommit > p.MaxCommitTs {
		// TiKV's CommitTsTooLarge: ordinary locks, and the client falls
		// back to two phases.
		sent.UseAsyncCommit, sent.TryOnePc, sent.Secondaries = false, false, nil
		m.stats.fallbacks.Add(1)
		return next.SendRequest(ctx, addr, withReq(req, &sent), timeout)
	}
	// The primary's lock in the mock carries min_commit_ts, so that the
	// mock refuses a commit below it.
	sent.MinCommitTs = minCommit
	resp, err := next.SendRequest(ctx, addr, withReq(req, &sent), timeout)
	if err != nil || resp == nil {
		return resp, err
	}
	pr, ok := resp.Resp.(*kvrpcpb.PrewriteResponse)
	if !ok || pr.RegionError != nil || len(pr.Errors) > 0 {
		return resp, nil
	}
	if p.TryOnePc {
		return m.onePhase(p, minCommit, resp, pr), nil
	}
	for _, mu := range p.Mutations {
		if mu.Op == kvrpcpb.Op_CheckNotExists {
			continue
		}
		a := &asyncLock{startTS: p.StartVersion, minCommitTS: minCommit, ttl: p.LockTtl, txnSize: p.TxnSize, op: lockOp(mu.Op), primary: p.PrimaryLock}
		if bytes.Equal(mu.Key, p.PrimaryLock) {
			a.secondaries = slices.Clone(p.Secondaries)
		}
		m.note(mu.Key, a)
	}
	m.stats.asyncPrewrites.Add(1)
	pr.MinCommitTs = max(minCommit, m.txnMinCommit(p))
	return resp, nil
}

// txnMinCommit is the highest min_commit_ts of the keys of p's
// transaction that p prewrites (more than minCommit if p is a retry of a
// prewrite answered before).
func (m *commits) txnMinCommit(p *kvrpcpb.PrewriteRequest) uint64 {
	var top uint64
	for _, mu := range p.Mutations {
		if a := m.lockOf(mu.Key, p.StartVersion); a != nil {
			top = max(top, a.minCommitTS)
		}
	}
	return top
}

// lockOp is the type of the lock a mutation writes.
func lockOp(op kvrpcpb.Op) kvrpcpb.Op {
	if op == kvrpcpb.Op_Insert {
		return kvrpcpb.Op_Put
	}
	return op
}

// withReq is req carrying body instead of its own.
func withReq(req *tikvrpc.Request, body any) *tikvrpc.Request {
	out := *req
	out.Req = body
	return &out
}

// commit serves a Commit: refused below an async-commit lock's
// min_commit_ts, as TiKV refuses it; a rollback record it replaces is
// kept (see rollbacks). The caller holds m.mu.
func (m *commits) commit(ctx context.Context, next tikvclient.Client, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	r := req.Commit()
	computed := false
	for _, k := range r.Keys {
		a := m.lockOf(k, r.StartVersion)
		if a == nil {
			continue
		}
		if start, ok := m.rec.lockOn(k); !ok || start != r.StartVersion {
			continue
		}
		computed = true
		if a.minCommitTS > r.CommitVersion {
			return &tikvrpc.Response{Resp: &kvrpcpb.CommitResponse{Error: &kvrpcpb.KeyError{CommitTsExpired: &kvrpcpb.CommitTsExpired{
				StartTs: r.StartVersion, AttemptedCommitTs: r.CommitVersion, Key: k, MinCommitTs: a.minCommitTS,
			}}}}, nil
		}
	}
	var over [][]byte
	if computed {
		over = m.committing(r.Keys, r.CommitVersion)
	}
	resp, err := next.SendRequest(ctx, addr, req, timeout)
	if len(over) > 0 {
		m.committed(over, r.CommitVersion)
	}
	m.prune(r.StartVersion)
	return resp, err
}

// resolveLock serves a ResolveLock (by keys if resolve.go can), keeping
// what a commit at a computed timestamp or a rollback would overwrite.
// The caller holds m.mu.
func (m *commits) resolveLock(ctx context.Context, l *locks, next tikvclient.Client, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	r := req.ResolveLock()
	var keys [][]byte
	if len(r.TxnInfos) == 0 {
		keys = l.inRegion(req, r)
	}
	var sh []shadowed
	var over [][]byte
	if r.CommitVersion == 0 {
		sh = m.rollingBack(keys, r.StartVersion)
	} else if len(m.txns[r.StartVersion]) > 0 {
		over = m.committing(keys, r.CommitVersion)
	}
	defer func() {
		m.rolledBack(sh)
		if len(over) > 0 {
			m.committed(over, r.CommitVersion)
		}
		m.prune(r.StartVersion)
	}()
	if resp, ok := l.resolve(ctx, next, addr, req, timeout); ok {
		return resp, nil
	}
	return next.SendRequest(ctx, addr, req, timeout)
}

// checkTxnStatus serves a CheckTxnStatus: an async-commit primary's lock
// is reported as it is (the caller then checks the secondaries), unless
// the caller forces a synchronous commit; anything else the mock serves.
// The caller holds m.mu.
func (m *commits) checkTxnStatus(ctx context.Context, next tikvclient.Client, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	r := req.CheckTxnStatus()
	m.observe(r.CallerStartTs)
	if m.rolledBackOver(r.PrimaryKey, r.LockTs) {
		return &tikvrpc.Response{Resp: &kvrpcpb.CheckTxnStatusResponse{Action: kvrpcpb.Action_NoAction}}, nil
	}
	if a := m.lockOf(r.PrimaryKey, r.LockTs); a != nil && !r.ForceSyncCommit {
		if start, ok := m.rec.lockOn(r.PrimaryKey); ok && start == r.LockTs {
			m.stats.asyncStatus.Add(1)
			return &tikvrpc.Response{Resp: &kvrpcpb.CheckTxnStatusResponse{
				LockTtl:  a.ttl,
				Action:   kvrpcpb.Action_NoAction,
				LockInfo: a.info(r.PrimaryKey),
			}}, nil
		}
	}
	sh := m.rollingBack([][]byte{r.PrimaryKey}, r.LockTs)
	resp, err := next.SendRequest(ctx, addr, req, timeout)
	m.rolledBack(sh)
	m.prune(r.LockTs)
	return resp, err
}

// checkSecondaryLocks serves a CheckSecondaryLocks, which the mock does
// not: for each key, in turn, the transaction's lock on it if it is still
// there, else the transaction's fate on it: committed (its commit
// timestamp), or rolled back (a rollback record written first if there
// was none, so that the prewrite, should it arrive late, fails). A
// pessimistic lock is rolled back, as its prewrite never came. The first
// key found committed or rolled back decides the answer. The caller holds
// m.mu.
func (m *commits) checkSecondaryLocks(r *kvrpcpb.CheckSecondaryLocksRequest) *tikvrpc.Response {
	m.stats.secondaryChecks.Add(1)
	ts := r.StartVersion
	out := &kvrpcpb.CheckSecondaryLocksResponse{}
	rollBack := func(k []byte) {
		sh := m.rollingBack([][]byte{k}, ts)
		if err := m.mvcc.Rollback([][]byte{k}, ts); err != nil {
			out.Error = &kvrpcpb.KeyError{Abort: err.Error()}
		}
		m.rolledBack(sh)
	}
	defer m.prune(ts)
	for _, k := range r.Keys {
		if m.rolledBackOver(k, ts) {
			out.Locks, out.CommitTs = nil, 0
			return &tikvrpc.Response{Resp: out}
		}
		info := m.rec.info(k)
		if l := info.Lock; l != nil && l.StartTs == ts {
			if l.Type == kvrpcpb.Op_PessimisticLock {
				rollBack(k)
				out.Locks, out.CommitTs = nil, 0
				return &tikvrpc.Response{Resp: out}
			}
			if a := m.lockOf(k, ts); a != nil {
				out.Locks = append(out.Locks, a.info(k))
			} else {
				// Its region's prewrite fell back: an ordinary lock.
				out.Locks = append(out.Locks, &kvrpcpb.LockInfo{Key: k, PrimaryLock: l.Primary, LockVersion: ts, LockType: l.Type})
			}
			continue
		}
		for _, w := range info.Writes {
			if w.StartTs != ts {
				continue
			}
			out.Locks = nil
			if w.Type != kvrpcpb.Op_Rollback {
				out.CommitTs = w.CommitTs
			}
			return &tikvrpc.Response{Resp: out}
		}
		rollBack(k)
		out.Locks, out.CommitTs = nil, 0
		return &tikvrpc.Response{Resp: out}
	}
	return &tikvrpc.Response{Resp: out}
}

// read serves a Get, BatchGet or Scan at T: max_ts raised to T first,
// async-commit locks whose min_commit_ts is above T read past, the
// others reported as such.
func (m *commits) read(ctx context.Context, next tikvclient.Client, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	var ts uint64
	switch req.Type {
	case tikvrpc.CmdGet:
		ts = req.Get().Version
	case tikvrpc.CmdBatchGet:
		ts = req.BatchGet().Version
	case tikvrpc.CmdScan:
		ts = req.Scan().Version
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	m.observe(ts)
	for {
		resp, err := next.SendRequest(ctx, addr, req, timeout)
		if err != nil || resp == nil {
			return resp, err
		}
		var past []uint64
		for _, l := range lockedIn(resp) {
			a := m.lockOf(l.Key, l.LockVersion)
			if a == nil {
				continue
			}
			if a.minCommitTS > ts {
				if !slices.Contains(past, l.LockVersion) {
					past = append(past, l.LockVersion)
				}
				continue
			}
			l.UseAsyncCommit, l.MinCommitTs = true, a.minCommitTS
			if bytes.Equal(l.Key, a.primary) {
				l.Secondaries = a.secondaries
			}
		}
		if len(past) == 0 {
			return resp, nil
		}
		// The mock skips the locks of the transactions the request says
		// are resolved: these commit above T, whatever becomes of them.
		m.stats.readPast.Add(int64(len(past)))
		again := *req
		again.Context.ResolvedLocks = append(slices.Clone(req.Context.ResolvedLocks), past...)
		req = &again
	}
}

// lockedIn returns the locks a read's answer reports.
func lockedIn(resp *tikvrpc.Response) []*kvrpcpb.LockInfo {
	var out []*kvrpcpb.LockInfo
	add := func(e *kvrpcpb.KeyError) {
		if e != nil && e.Locked != nil {
			out = append(out, e.Locked)
		}
	}
	switch r := resp.Resp.(type) {
	case *kvrpcpb.GetResponse:
		add(r.Error)
	case *kvrpcpb.BatchGetResponse:
		add(r.Error)
		for _, p := range r.Pairs {
			add(p.Error)
		}
	case *kvrpcpb.ScanResponse:
		add(r.Error)
		for _, p := range r.Pairs {
			add(p.Error)
		}
	}
	return out
}

// init readies m on the mock's store; on is false for a cluster that
// commits in two phases only.
func (m *commits) init(mvcc testutils.MVCCStore, on bool) error {
	m.on = on
	m.mvcc = mvcc
	rec, err := newRecords(mvcc)
	if err != nil {
		return err
	}
	m.rec = rec
	m.async = map[string]*asyncLock{}
	m.txns = map[uint64]map[string]struct{}{}
	m.overlapped = map[txnKey]struct{}{}
	return nil
}
