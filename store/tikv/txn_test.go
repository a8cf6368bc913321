package tikv_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pingcap/kvproto/pkg/errorpb"
	"github.com/pingcap/kvproto/pkg/kvrpcpb"
	tikvclient "github.com/tikv/client-go/v2/tikv"
	"github.com/tikv/client-go/v2/tikvrpc"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
	"github.com/trickle-dev/trickle/store/tikv"
)

var counter = store.Column{Family: "f", Qualifier: "n"}

// increment reads the counter of row at ts 0 and writes it back plus one,
// with a check that the value read is still the current one.
func increment(t *testing.T, s store.Store, row []byte) {
	cells, err := s.ReadRow(bg, "t", row, []store.Column{counter}, []store.Span{{}})
	if err != nil {
		t.Error(err)
		return
	}
	var n uint64
	var prefix []byte
	if len(cells) == 1 {
		n = binary.BigEndian.Uint64(cells[0].Value)
		prefix = cells[0].Value
	}
	txn := &store.RowTxn{Table: "t", Row: row,
		Mutations: []store.Mutation{{Column: counter, Value: binary.BigEndian.AppendUint64(nil, n+1)}}}
	if prefix == nil {
		txn.Checks = []store.Check{{Column: counter, Expect: store.MustBeAbsent}}
	} else {
		txn.Checks = []store.Check{{Column: counter, ValuePrefix: prefix, Expect: store.MustExist}}
	}
	res, err := s.Apply(bg, txn)
	if err != nil {
		t.Error(err)
		return
	}
	if !res.Applied {
		increment(t, s, row) // lost the race: read again
	}
}

func readCounter(t *testing.T, s store.Store, row []byte) uint64 {
	t.Helper()
	cells, err := s.ReadRow(bg, "t", row, []store.Column{counter}, []store.Span{{}})
	if err != nil || len(cells) != 1 {
		t.Fatalf("counter %q: %v %v", row, cells, err)
	}
	return binary.BigEndian.Uint64(cells[0].Value)
}

// TestConcurrentIncrements: concurrent read-check-write increments of one
// row's counter and of several rows' lose none.
func TestConcurrentIncrements(t *testing.T) {
	s := openMock(t, mockOptions{splits: regionSplits()})
	const workers, each = 4, 25
	rows := [][]byte{[]byte("r001"), []byte("r050"), []byte("r099")}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				increment(t, s, rows[0])
				increment(t, s, rows[1+(w+i)%2])
			}
		})
	}
	wg.Wait()
	if n := readCounter(t, s, rows[0]); n != workers*each {
		t.Fatalf("one row: %d increments, want %d", n, workers*each)
	}
	if n := readCounter(t, s, rows[1]) + readCounter(t, s, rows[2]); n != workers*each {
		t.Fatalf("two rows: %d increments, want %d", n, workers*each)
	}
}

// TestGuardSerializesRow: row transactions that write different cells of
// a row, each checking that the other's cell is absent, exclude each
// other: only the guard key makes them conflict in TiKV.
func TestGuardSerializesRow(t *testing.T) {
	s := openMock(t, mockOptions{})
	for round := range 20 {
		row := fmt.Appendf(nil, "row%d", round)
		const n = 4
		var wg sync.WaitGroup
		applied := make([]bool, n)
		for i := range n {
			wg.Go(func() {
				var checks []store.Check
				for j := range n {
					if j != i {
						checks = append(checks, store.Check{Column: store.Column{Family: "f", Qualifier: fmt.Sprint(j)}, MaxTs: ^uint64(0)})
					}
				}
				res, err := s.Apply(bg, &store.RowTxn{Table: "t", Row: row, Checks: checks,
					Mutations: []store.Mutation{{Column: store.Column{Family: "f", Qualifier: fmt.Sprint(i)}, Ts: 1, Value: []byte("x")}}})
				if err != nil {
					t.Error(err)
				}
				applied[i] = res.Applied
			})
		}
		wg.Wait()
		won := 0
		for _, a := range applied {
			if a {
				won++
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d of %d exclusive row transactions applied: %v", round, won, n, applied)
		}
	}
}

// TestApplyAllAtomicPerRow: concurrent ApplyAll calls over overlapping
// rows, each writing two cells per row; every row ends with pairs of cells
// from one call each, and counters lose no increments.
func TestApplyAllConcurrent(t *testing.T) {
	s := openMock(t, mockOptions{splits: regionSplits()})
	const workers, rounds = 4, 15
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				ts := uint64(1 + w*rounds + r)
				var txns []*store.RowTxn
				for i := range 5 {
					row := fmt.Appendf(nil, "r%03d", (i*20+w)%100)
					txns = append(txns, &store.RowTxn{Table: "t", Row: row,
						Checks: []store.Check{{Column: store.Column{Family: "f", Qualifier: "a"}, MinTs: ts, MaxTs: ts}},
						Mutations: []store.Mutation{
							{Column: store.Column{Family: "f", Qualifier: "a"}, Ts: ts, Value: []byte{byte(w)}},
							{Column: store.Column{Family: "f", Qualifier: "b"}, Ts: ts, Value: []byte{byte(w)}},
						}})
				}
				res, err := s.ApplyAll(bg, txns)
				if err != nil {
					t.Error(err)
					return
				}
				for i, r := range res {
					if !r.Applied {
						t.Errorf("worker %d: txns[%d] not applied: %+v", w, i, r)
					}
				}
			}
		})
	}
	wg.Wait()
	cells, err := storetest.Collect(s.Scan(bg, store.ScanRequest{Table: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	if want := workers * rounds * 5 * 2; len(cells) != want {
		t.Fatalf("%d cells, want %d", len(cells), want)
	}
}

// TestConflictRetry: a row transaction that meets a write conflict (a
// competing row transaction on the same row, writing another cell,
// committed between its snapshot and its prewrite) starts over and
// applies; the competitor's write is kept.
func TestConflictRetry(t *testing.T) {
	var (
		target     *tikv.Store
		armed      bool
		prewrites  int
		competitor error
	)
	cc := &countingClient{}
	cc.onPrewrite = func() {
		prewrites++
		if !armed {
			return
		}
		armed = false
		_, competitor = target.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"),
			Mutations: []store.Mutation{{Column: store.Column{Family: "f", Qualifier: "other"}, Ts: 1, Value: []byte("o")}}})
	}
	target = openMock(t, mockOptions{hijack: func(c tikvclient.Client) tikvclient.Client { cc.Client = c; return cc }})
	armed, prewrites = true, 0
	res, err := target.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"),
		Checks:    []store.Check{{Column: store.Column{Family: "f", Qualifier: "mine"}, MaxTs: ^uint64(0)}},
		Mutations: []store.Mutation{{Column: store.Column{Family: "f", Qualifier: "mine"}, Ts: 1, Value: []byte("m")}}})
	if err != nil || !res.Applied || competitor != nil {
		t.Fatalf("Apply after a conflict: %+v %v (competitor: %v)", res, err, competitor)
	}
	if prewrites != 3 {
		t.Fatalf("%d prewrites, want 3: ours, the competitor's, ours again", prewrites)
	}
	cells, err := target.ReadRow(bg, "t", []byte("r"), []store.Column{{Family: "f", Qualifier: "mine"}, {Family: "f", Qualifier: "other"}}, nil)
	if err != nil || len(cells) != 2 {
		t.Fatalf("row after the retry: %v %v", cells, err)
	}
}

// TestUndeterminedCommit: a commit whose answer is lost is an error that
// says the result is unknown (ErrUndetermined, store.ErrUnavailable), not
// a success and not a plain failure.
func TestUndeterminedCommit(t *testing.T) {
	cc := &countingClient{}
	var lose bool
	cc.onCommit = func(resp *tikvrpc.Response) *tikvrpc.Response {
		if !lose {
			return resp
		}
		return &tikvrpc.Response{Resp: &kvrpcpb.CommitResponse{RegionError: &errorpb.Error{
			Message: "injected", UndeterminedResult: &errorpb.UndeterminedResult{Message: "injected"}}}}
	}
	s := openMock(t, mockOptions{hijack: func(c tikvclient.Client) tikvclient.Client { cc.Client = c; return cc }})
	lose = true
	_, err := s.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"),
		Mutations: []store.Mutation{{Column: store.Column{Family: "f", Qualifier: "q"}, Ts: 1, Value: []byte("v")}}})
	if !errors.Is(err, tikv.ErrUndetermined) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Apply with its commit answer lost: %v, want ErrUndetermined and store.ErrUnavailable", err)
	}
	lose = false
	// The commit did happen: the answer was lost, not the write.
	cells, err := s.ReadRow(bg, "t", []byte("r"), []store.Column{{Family: "f", Qualifier: "q"}}, nil)
	if err != nil || len(cells) != 1 {
		t.Fatalf("after the undetermined commit: %v %v", cells, err)
	}
}

// rollingBackClient rolls back the first n transactions it sees committing
// just before their commit request is sent, as another client does that
// found their primary lock past its TTL.
type rollingBackClient struct {
	tikvclient.Client
	mu       sync.Mutex
	n        int
	rejected int
}

func (c *rollingBackClient) SendRequest(ctx context.Context, addr string, req *tikvrpc.Request, timeout time.Duration) (*tikvrpc.Response, error) {
	if req.Type == tikvrpc.CmdCommit {
		c.mu.Lock()
		roll := c.n > 0
		if roll {
			c.n--
		}
		c.mu.Unlock()
		if roll {
			cr := req.Commit()
			rb := tikvrpc.NewRequest(tikvrpc.CmdBatchRollback, &kvrpcpb.BatchRollbackRequest{StartVersion: cr.StartVersion, Keys: cr.Keys}, req.Context)
			if _, err := c.Client.SendRequest(ctx, addr, rb, timeout); err != nil {
				return nil, err
			}
			resp, err := c.Client.SendRequest(ctx, addr, req, timeout)
			if err == nil {
				if r, ok := resp.Resp.(*kvrpcpb.CommitResponse); ok && r.Error != nil {
					c.mu.Lock()
					c.rejected++
					c.mu.Unlock()
				}
			}
			return resp, err
		}
	}
	return c.Client.SendRequest(ctx, addr, req, timeout)
}

// TestCommitOfRolledBackRowTxnIsRetried: a row transaction whose TiKV
// transaction was rolled back by another client before its commit (TiKV
// answers that it may be retried) took no effect, so Apply evaluates it
// again rather than failing.
func TestCommitOfRolledBackRowTxnIsRetried(t *testing.T) {
	rc := &rollingBackClient{}
	s := openMock(t, mockOptions{hijack: func(c tikvclient.Client) tikvclient.Client { rc.Client = c; return rc }})
	rc.mu.Lock()
	rc.n = 2 // after the open, which commits the group layout
	rc.mu.Unlock()
	col := store.Column{Family: "f", Qualifier: "q"}
	res, err := s.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"),
		Checks:    []store.Check{{Column: col, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{{Column: col, Ts: 1, Value: []byte("v")}}})
	if err != nil || !res.Applied {
		t.Fatalf("Apply after two rolled-back attempts: %+v, %v; want applied", res, err)
	}
	if rc.rejected != 2 {
		t.Fatalf("%d commits were rejected, want 2: the test did not roll back what it meant to", rc.rejected)
	}
	cells, err := s.ReadRow(bg, "t", []byte("r"), []store.Column{col}, nil)
	if err != nil || len(cells) != 1 || string(cells[0].Value) != "v" {
		t.Fatalf("after the retried commit: %v %v", cells, err)
	}
}
