package remote

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// atomicRow fails if (t, row) has cell f:lock and writes f:q at Ts 1000
// (relative when marked so) and f:data at 5.
func atomicRow(row string) *store.RowTxn {
	return &store.RowTxn{Table: "t", Row: []byte(row),
		Checks: []store.Check{{Column: col("f", "lock"), MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{
			{Column: col("f", "q"), Ts: 1000, Value: []byte("v" + row)},
			{Column: col("f", "data"), Ts: 5, Value: []byte("d" + row)},
		}}
}

// The service draws the commit timestamp from its oracle, writes every
// row with it added to the marked mutations, and returns it; a failed
// check anywhere writes nothing and draws nothing.
func TestApplyAtomicWritesAllAtTheDrawnTimestamp(t *testing.T) {
	or := &fixedOracle{ts: 150}
	env := newStoreEnv(t, &ServiceOptions{Oracle: or}, nil)
	ctx := context.Background()
	ts, res, err := env.client.ApplyAtomic(ctx, []*store.RowTxn{atomicRow("a"), atomicRow("b")}, []int{1, 0}, nil)
	if err != nil || ts != 150 || len(res) != 2 || !res[0].Applied || !res[1].Applied {
		t.Fatalf("ApplyAtomic = %d, %+v, %v; want both applied at 150", ts, res, err)
	}
	if or.calls.Load() != 1 {
		t.Fatalf("%d draws for one ApplyAtomic", or.calls.Load())
	}
	cells, err := env.db.ReadRow(ctx, "t", []byte("a"), []store.Column{col("f", "q"), col("f", "data")}, nil)
	if err != nil || len(cells) != 2 || cells[0].Ts != 1150 || cells[1].Ts != 5 {
		t.Fatalf("row a: %+v, %v; want f:q at 1000+150 and f:data at 5", cells, err)
	}
	cells, err = env.db.ReadRow(ctx, "t", []byte("b"), []store.Column{col("f", "q")}, nil)
	if err != nil || len(cells) != 1 || cells[0].Ts != 1000 {
		t.Fatalf("row b: %+v, %v; want f:q at 1000 (not relative)", cells, err)
	}

	versions(t, env.db, "t", "d", col("f", "lock"), 7)
	_, res, err = env.client.ApplyAtomic(ctx, []*store.RowTxn{atomicRow("c"), atomicRow("d")}, []int{1, 1}, nil)
	if err != nil || res[0].Applied || res[1].Applied || res[1].FailedCheck != 0 || res[1].Conflict == nil || res[1].Conflict.Ts != 7 {
		t.Fatalf("over a lock: %+v, %v; want nothing applied, row d's check 0 failed on the lock at 7", res, err)
	}
	if or.calls.Load() != 1 {
		t.Fatalf("a failed ApplyAtomic drew a timestamp")
	}
	if cells, err := env.db.ReadRow(ctx, "t", []byte("c"), []store.Column{col("f", "q")}, nil); err != nil || len(cells) != 0 {
		t.Fatalf("row c written by a failed ApplyAtomic: %+v, %v", cells, err)
	}
}

// A service without an oracle says so with errors.ErrUnsupported, having
// written nothing; the client then answers so itself for a while.
func TestApplyAtomicWithoutAnOracle(t *testing.T) {
	env := newStoreEnv(t, nil, nil)
	ctx := context.Background()
	_, _, err := env.client.ApplyAtomic(ctx, []*store.RowTxn{atomicRow("a")}, []int{1}, nil)
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "Oracle") {
		t.Fatalf("err = %v, want one matching errors.ErrUnsupported that names the missing ServiceOptions.Oracle", err)
	}
	env.svc.Stop()
	if _, _, err := env.client.ApplyAtomic(ctx, []*store.RowTxn{atomicRow("a")}, []int{1}, nil); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("second call: %v, want errors.ErrUnsupported without a request", err)
	}
	if cells, err := env.db.ReadRow(ctx, "t", []byte("a"), []store.Column{col("f", "q")}, nil); err != nil || len(cells) != 0 {
		t.Fatalf("written: %+v, %v", cells, err)
	}
}

// Bad requests fail with an InvalidError naming what was wrong, on the
// client or in the service, and write nothing.
func TestApplyAtomicRefusals(t *testing.T) {
	or := &fixedOracle{ts: 150}
	env := newStoreEnv(t, &ServiceOptions{Oracle: or}, nil)
	big := atomicRow("a")
	big.Mutations[0].Ts = ^uint64(0) - 100
	for _, tc := range []struct {
		name  string
		txns  []*store.RowTxn
		rel   []int
		field string
	}{
		{"nil txn", []*store.RowTxn{nil}, []int{0}, "txns[0]"},
		{"short rel", []*store.RowTxn{atomicRow("a")}, nil, "rel"},
		{"rel past the mutations", []*store.RowTxn{atomicRow("a")}, []int{3}, "rel[0]"},
		{"same row twice", []*store.RowTxn{atomicRow("a"), atomicRow("a")}, []int{0, 0}, "txns[1]"},
		{"overflow", []*store.RowTxn{big}, []int{1}, "txns[0].Mutations[0].Ts"},
	} {
		_, _, err := env.client.ApplyAtomic(context.Background(), tc.txns, tc.rel, nil)
		var inv *store.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field || inv.Op != "ApplyAtomic" {
			t.Errorf("%s: %v, want an InvalidError of ApplyAtomic on %s", tc.name, err, tc.field)
		}
	}
	if cells, err := env.db.ReadRow(context.Background(), "t", []byte("a"), []store.Column{col("f", "q"), col("f", "data")}, nil); err != nil || len(cells) != 0 {
		t.Fatalf("written: %+v, %v", cells, err)
	}
}

// An oracle that fails behind the service gives store.ErrNoTimestamp at
// the client, for ApplyAtomic and ApplyNow alike: the service drew no
// timestamp and wrote nothing, which a committer must be able to tell
// from a lost answer.
func TestCommitsWhoseTimestampTheServiceCannotDraw(t *testing.T) {
	down := errors.New("oracle down")
	env := newStoreEnv(t, &ServiceOptions{Oracle: &fixedOracle{err: down}}, nil)
	ctx := context.Background()
	_, _, err := env.client.ApplyAtomic(ctx, []*store.RowTxn{atomicRow("a")}, []int{1}, nil)
	if !errors.Is(err, store.ErrNoTimestamp) || !strings.Contains(err.Error(), down.Error()) {
		t.Fatalf("ApplyAtomic: %v, want store.ErrNoTimestamp naming the oracle's error", err)
	}
	_, _, err = env.client.ApplyNow(ctx, atomicRow("a"), 1)
	if !errors.Is(err, store.ErrNoTimestamp) || !strings.Contains(err.Error(), down.Error()) {
		t.Fatalf("ApplyNow: %v, want store.ErrNoTimestamp naming the oracle's error", err)
	}
	if cells, err := env.db.ReadRow(ctx, "t", []byte("a"), []store.Column{col("f", "q"), col("f", "data")}, nil); err != nil || len(cells) != 0 {
		t.Fatalf("written: %+v, %v", cells, err)
	}
}
