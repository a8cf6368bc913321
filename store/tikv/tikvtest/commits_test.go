package tikvtest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	tikverr "github.com/tikv/client-go/v2/error"
	"github.com/tikv/client-go/v2/metrics"
	"github.com/tikv/client-go/v2/oracle"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"
	"github.com/tikv/client-go/v2/txnkv/transaction"
	"github.com/tikv/client-go/v2/util/codec"
)

// Helpers of the commit tests (asynccommit_test.go, onepc_test.go).

// committedAs is how client-go says it committed a transaction.
type committedAs struct {
	StartTS             uint64 `json:"start_ts"`
	CommitTS            uint64 `json:"commit_ts"`
	Mode                string `json:"txn_commit_mode"`
	AsyncCommitFallback bool   `json:"async_commit_fallback"`
	OnePCFallback       bool   `json:"one_pc_fallback"`
}

// begin starts a transaction on kv that asks for async commit and
// one-phase commit (as the engine's do), writing key=value for each pair
// of kvs, and returns it with where its commit callback will say how it
// committed.
func begin(t *testing.T, kv *tikvclient.KVStore, kvs ...string) (*transaction.KVTxn, *committedAs) {
	t.Helper()
	txn, err := kv.Begin()
	if err != nil {
		t.Fatal(err)
	}
	txn.SetEnableAsyncCommit(true)
	txn.SetEnable1PC(true)
	for i := 0; i+1 < len(kvs); i += 2 {
		if err := txn.Set([]byte(kvs[i]), []byte(kvs[i+1])); err != nil {
			t.Fatal(err)
		}
	}
	var as committedAs
	txn.SetCommitCallback(func(info string, _ error) {
		if err := json.Unmarshal([]byte(info), &as); err != nil {
			t.Errorf("commit info %q: %v", info, err)
		}
	})
	return txn, &as
}

// counted is how many transactions client-go counted committed in each
// mode since before.
func counted(before metrics.TxnCommitCounter) metrics.TxnCommitCounter {
	return metrics.GetTxnCommitCounter().Sub(before)
}

// readAt reads key at ts on kv: its value, "" if it has none.
func readAt(t *testing.T, kv *tikvclient.KVStore, ts uint64, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := kv.GetSnapshot(ts).Get(ctx, []byte(key))
	if tikverr.IsErrNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatalf("read %s at %d: %v", key, ts, err)
	}
	return string(v.Value)
}

// now draws a timestamp on kv.
func now(t *testing.T, kv *tikvclient.KVStore) uint64 {
	t.Helper()
	ts, err := kv.CurrentTimestamp(oracle.GlobalTxnScope)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// expire moves PD's clock past the TTL of every lock written so far
// and draws a timestamp on kv: kv's lock resolver, which judges a lock's
// TTL by the last timestamp it drew, takes them all for expired.
func (c *Cluster) expire(t *testing.T, kv *tikvclient.KVStore) uint64 {
	t.Helper()
	c.AdvanceClock(time.Minute)
	return now(t, kv)
}

// writer hijacks a client's RPCs as a writer that dies: its commits
// never arrive, and a prewrite of a key in lose never arrives either,
// until late sends it on. prewrote receives the keys of each prewrite
// answered.
type writer struct {
	tikvclient.Client
	lose     map[string]bool
	late     chan struct{}
	held     chan struct{}
	prewrote chan []byte
}

func newWriter(lose ...string) *writer {
	w := &writer{lose: map[string]bool{}, late: make(chan struct{}), held: make(chan struct{}, 8), prewrote: make(chan []byte, 64)}
	for _, k := range lose {
		w.lose[k] = true
	}
	return w
}

func (w *writer) hijack(inner tikvclient.Client) tikvclient.Client {
	w.Client = inner
	return w
}

func (w *writer) SendRequest(ctx context.Context, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	switch req.Type {
	case tikvrpc.CmdCommit:
		<-ctx.Done() // the process died: it never arrives
		return nil, ctx.Err()
	case tikvrpc.CmdPrewrite:
		p := req.Prewrite()
		for _, m := range p.Mutations {
			if w.lose[string(m.Key)] {
				w.held <- struct{}{}
				select {
				case <-w.late:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				break
			}
		}
		resp, err := w.Client.SendRequest(ctx, addr, req, timeout)
		if err == nil {
			for _, m := range p.Mutations {
				w.prewrote <- m.Key
			}
		}
		return resp, err
	}
	return w.Client.SendRequest(ctx, addr, req, timeout)
}

// mvccOf returns what the mock holds of key.
func (c *Cluster) mvccOf(key string) *kvrpcpb.MvccInfo { return c.commits.rec.info([]byte(key)) }

// send sends req, of key's region, to the cluster as a client would.
func (c *Cluster) send(t *testing.T, key string, req *tikvrpc.Request) *tikvrpc.Response {
	t.Helper()
	region, peer, _, _ := c.locks.mock.GetRegionByKey(codec.EncodeBytes(nil, []byte(key)))
	if region == nil {
		t.Fatalf("no region holds %q", key)
	}
	req.Context.RegionId, req.Context.RegionEpoch, req.Context.Peer = region.GetId(), region.GetRegionEpoch(), peer
	store := c.locks.mock.GetStore(peer.GetStoreId())
	resp, err := (&counting{Client: c.rpc, c: c}).SendRequest(context.Background(), store.GetAddress(), req, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func tikvrpcPrewrite(p *kvrpcpb.PrewriteRequest) *tikvrpc.Request {
	return tikvrpc.NewRequest(tikvrpc.CmdPrewrite, p)
}
