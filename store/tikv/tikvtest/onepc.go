package tikvtest

import (
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/tikv/client-go/v2/tikvrpc"
)

// onePhase finishes a one-phase prewrite (TryOnePc: the client sends it
// only when all its mutations are in one region) whose locks the mock has
// just written, as TiKV's one-phase commit does: it commits them at once
// at commitTS (max(start_ts+1, the request's MinCommitTs, max_ts+1)), so
// that the write records go in and no lock remains, and answers
// OnePcCommitTs. The prewrite's conflict checks were the mock's, and
// m.mu, held from the prewrite to here, keeps every read from seeing the
// locks in between: the transaction is written as one step, as TiKV
// writes it in one batch. Should the commit fail, the locks are rolled
// back and the prewrite fails, as a TiKV whose batch failed to apply
// leaves nothing. The caller holds m.mu.
func (m *commits) onePhase(p *kvrpcpb.PrewriteRequest, commitTS uint64, resp *tikvrpc.Response, pr *kvrpcpb.PrewriteResponse) *tikvrpc.Response {
	keys := mutationKeys(p)
	over := m.committing(keys, commitTS)
	if err := m.mvcc.Commit(keys, p.StartVersion, commitTS); err != nil {
		_ = m.mvcc.Rollback(keys, p.StartVersion)
		return &tikvrpc.Response{Resp: &kvrpcpb.PrewriteResponse{Errors: []*kvrpcpb.KeyError{{Abort: "one-phase commit: " + err.Error()}}}}
	}
	m.committed(over, commitTS)
	m.stats.onePC.Add(1)
	pr.OnePcCommitTs = commitTS
	pr.MinCommitTs = 0
	return resp
}
