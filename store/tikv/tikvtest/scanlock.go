package tikvtest

import (
	"bytes"
	"slices"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	"github.com/tikv/client-go/v2/testutils"
	"github.com/tikv/client-go/v2/tikvrpc"
)

// scanLock answers a ScanLock by the keys the cluster's transactions
// prewrote and have not resolved (see locks), as TiKV answers it by
// reading its lock column family, which holds only the locks: the mock
// reads every key and version of the range instead, under the mutex every
// request takes, and a range that holds many settled notifications (the
// engine's finding work checks their locks) then costs more than the
// transactions around it. Each candidate is confirmed by the mock, one
// key at a time, and given its lock's TTL, which the mock's answer leaves
// out and TiKV's does not. ok is false if the keys are not known in full (they
// started over): the caller sends req to the mock itself.
func (l *locks) scanLock(mvcc testutils.MVCCStore, req *tikvrpc.Request) (*tikvrpc.Response, bool) {
	r := req.ScanLock()
	l.mu.Lock()
	if l.floor != 0 {
		l.mu.Unlock()
		return nil, false
	}
	var candidates [][]byte
	ttls := map[uint64]uint64{}
	for ts, ks := range l.keys {
		if ts > r.MaxVersion {
			continue
		}
		ttls[ts] = l.ttls[ts]
		for k := range ks {
			kb := []byte(k)
			if bytes.Compare(kb, r.StartKey) >= 0 && (len(r.EndKey) == 0 || bytes.Compare(kb, r.EndKey) < 0) {
				candidates = append(candidates, kb)
			}
		}
	}
	l.mu.Unlock()
	slices.SortFunc(candidates, bytes.Compare)
	candidates = slices.CompactFunc(candidates, bytes.Equal)
	var found []*kvrpcpb.LockInfo
	for _, k := range candidates {
		if r.Limit > 0 && uint32(len(found)) >= r.Limit {
			break
		}
		infos, err := mvcc.ScanLock(k, append(slices.Clip(k), 0), r.MaxVersion)
		if err != nil {
			return nil, false
		}
		for _, info := range infos {
			if info.LockTtl == 0 {
				info.LockTtl = ttls[info.LockVersion]
			}
		}
		found = append(found, infos...)
	}
	return &tikvrpc.Response{Resp: &kvrpcpb.ScanLockResponse{Locks: found}}, true
}
