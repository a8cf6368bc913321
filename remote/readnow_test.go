package remote

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// fixedOracle gives the timestamp it holds, and counts the calls.
type fixedOracle struct {
	ts    uint64
	calls atomic.Int64
	err   error
}

func (o *fixedOracle) Reserve(context.Context, int) (uint64, error) {
	o.calls.Add(1)
	return o.ts, o.err
}

// versions writes cell (t, r, c) at each of tss.
func versions(t *testing.T, st store.Store, table, row string, c store.Column, tss ...uint64) {
	t.Helper()
	for _, ts := range tss {
		if _, err := st.Apply(context.Background(), &store.RowTxn{Table: table, Row: []byte(row),
			Mutations: []store.Mutation{{Column: c, Ts: ts, Value: []byte{byte(ts)}}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// The service draws the timestamp while it serves the read, adds it to the
// bounds marked relative, leaves the others as sent, and returns it.
func TestReadRowsNowReadsAtTheTimestampTheServiceDraws(t *testing.T) {
	or := &fixedOracle{ts: 150}
	env := newStoreEnv(t, &ServiceOptions{Oracle: or}, nil)
	c := col("f", "q")
	versions(t, env.db, "t", "a", c, 100, 200)
	versions(t, env.db, "t", "b", c, 120, 140, 160)
	reads := []store.RowRead{
		// span 0 absolute (everything), span 1 relative: newest at or below the timestamp
		{Table: "t", Row: []byte("a"), Columns: []store.Column{c}, Spans: []store.Span{{MinTs: 190, MaxTs: 300}, {MaxTs: 0, Limit: 1}}},
		{Table: "t", Row: []byte("b"), Columns: []store.Column{c}, Spans: []store.Span{{MinTs: 1000, MaxTs: 1000}, {MaxTs: 0, Limit: 1}}},
	}
	ts, res, err := env.client.ReadRowsNow(context.Background(), reads, 1<<1)
	if err != nil {
		t.Fatal(err)
	}
	if ts != 150 || or.calls.Load() != 1 {
		t.Fatalf("timestamp %d from %d oracle calls, want 150 from 1", ts, or.calls.Load())
	}
	got := func(cells []store.Cell) (tss []uint64) {
		for _, c := range cells {
			tss = append(tss, c.Ts)
		}
		return tss
	}
	if g := got(res[0]); len(g) != 2 || g[0] != 200 || g[1] != 100 {
		t.Errorf("row a read versions %v, want [200 100] (200 by the absolute span, 100 as the newest at or below 150)", g)
	}
	if g := got(res[1]); len(g) != 1 || g[0] != 140 {
		t.Errorf("row b read versions %v, want [140]", g)
	}
}

// A service without an oracle says so with errors.ErrUnsupported, and the
// client then answers the same itself, without asking, so that callers
// fall back at no cost: the second call succeeds in that way even with the
// service gone.
func TestReadRowsNowWithoutAnOracleIsUnsupported(t *testing.T) {
	env := newStoreEnv(t, nil, nil)
	reads := []store.RowRead{{Table: "t", Row: []byte("a"), Columns: []store.Column{col("f", "q")}, Spans: []store.Span{{Limit: 1}}}}
	if !env.client.ChoosesTimestamps() {
		t.Fatal("a new client says its service cannot choose timestamps before asking")
	}
	_, _, err := env.client.ReadRowsNow(context.Background(), reads, 1)
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "Oracle") {
		t.Fatalf("err = %v, want one matching errors.ErrUnsupported that names the missing ServiceOptions.Oracle", err)
	}
	if env.client.ChoosesTimestamps() {
		t.Fatal("ChoosesTimestamps still true after the service said it cannot")
	}
	env.svc.Stop()
	_, _, err = env.client.ReadRowsNow(context.Background(), reads, 1)
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("second call: err = %v, want errors.ErrUnsupported without a request", err)
	}
	if _, err := env.client.ReadRows(context.Background(), reads); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("ReadRows with the service stopped: err = %v, want ErrUnavailable", err)
	}
}

// Nothing listening on the call's subject (a service from before it) is
// the same as a service without an oracle.
func TestReadRowsNowWithNoResponderIsUnsupported(t *testing.T) {
	env := newStoreEnv(t, nil, nil)
	env.svc.Stop()
	reads := []store.RowRead{{Table: "t", Row: []byte("a"), Columns: []store.Column{col("f", "q")}, Spans: []store.Span{{Limit: 1}}}}
	_, _, err := env.client.ReadRowsNow(context.Background(), reads, 1)
	if !errors.Is(err, errors.ErrUnsupported) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want one matching errors.ErrUnsupported and ErrUnavailable", err)
	}
}

// Bad requests fail with an InvalidError naming what was wrong, before or
// after the timestamp is drawn, and read nothing.
func TestReadRowsNowRefusesBadBounds(t *testing.T) {
	or := &fixedOracle{ts: 150}
	env := newStoreEnv(t, &ServiceOptions{Oracle: or}, nil)
	c := []store.Column{col("f", "q")}
	for _, tc := range []struct {
		name  string
		reads []store.RowRead
		rel   uint64
		field string
	}{
		{"no read", nil, 1, "reads"},
		{"relative span beyond the read's", []store.RowRead{{Table: "t", Row: []byte("a"), Columns: c, Spans: []store.Span{{Limit: 1}}}}, 1 << 1, "reads[0].Spans"},
		{"overflow", []store.RowRead{{Table: "t", Row: []byte("a"), Columns: c, Spans: []store.Span{{MaxTs: ^uint64(0) - 100, Limit: 1}}}}, 1, "reads[0].Spans[0].MaxTs"},
		{"bad read", []store.RowRead{{Table: "", Row: []byte("a"), Columns: c, Spans: []store.Span{{Limit: 1}}}}, 1, "reads[0].Table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := env.client.ReadRowsNow(context.Background(), tc.reads, tc.rel)
			var inv *store.InvalidError
			if !errors.As(err, &inv) || inv.Field != tc.field {
				t.Fatalf("err = %v, want an InvalidError on %s", err, tc.field)
			}
		})
	}
}

// An oracle that fails fails the read with its error.
func TestReadRowsNowFailsWithTheOraclesError(t *testing.T) {
	or := &fixedOracle{err: errors.New("oracle broke")}
	env := newStoreEnv(t, &ServiceOptions{Oracle: or}, nil)
	reads := []store.RowRead{{Table: "t", Row: []byte("a"), Columns: []store.Column{col("f", "q")}, Spans: []store.Span{{Limit: 1}}}}
	_, _, err := env.client.ReadRowsNow(context.Background(), reads, 1)
	if err == nil || !strings.Contains(err.Error(), "oracle broke") || errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("err = %v, want the oracle's error, not ErrUnsupported", err)
	}
}

// ApplyNow adds the timestamp it draws to the mutations marked relative,
// leaves the others as sent, checks as Apply does, and returns it.
func TestApplyNowWritesAtTheTimestampTheServiceDraws(t *testing.T) {
	or := &fixedOracle{ts: 150}
	env := newStoreEnv(t, &ServiceOptions{Oracle: or}, nil)
	c, lock := col("f", "q"), col("f", "lock")
	versions(t, env.db, "t", "a", lock, 7)
	txn := &store.RowTxn{Table: "t", Row: []byte("a"),
		Checks:    []store.Check{{Column: lock, MinTs: 7, MaxTs: 7, Expect: store.MustExist}},
		Mutations: []store.Mutation{{Column: lock, Ts: 7, Delete: true}, {Column: c, Ts: 1000, Value: []byte("v")}}}
	ts, res, err := env.client.ApplyNow(context.Background(), txn, 1<<1)
	if err != nil || !res.Applied || ts != 150 {
		t.Fatalf("ApplyNow: ts %d, %+v, %v; want applied at 150", ts, res, err)
	}
	cells, err := env.db.ReadRow(context.Background(), "t", []byte("a"), []store.Column{c, lock}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 1 || cells[0].Ts != 1150 || string(cells[0].Value) != "v" {
		t.Fatalf("cells after ApplyNow: %+v; want only f:q at 1000+150", cells)
	}
	// The check no longer holds: nothing is applied, the result says why.
	_, res, err = env.client.ApplyNow(context.Background(), txn, 1<<1)
	if err != nil || res.Applied || res.FailedCheck != 0 {
		t.Fatalf("second ApplyNow: %+v, %v; want check 0 failed", res, err)
	}
}

// ApplyNow without an oracle, or with bad relative timestamps, applies
// nothing and says what was wrong.
func TestApplyNowRefusals(t *testing.T) {
	c := col("f", "q")
	txn := func(ts uint64) *store.RowTxn {
		return &store.RowTxn{Table: "t", Row: []byte("a"), Mutations: []store.Mutation{{Column: c, Ts: ts, Value: []byte("v")}}}
	}
	env := newStoreEnv(t, nil, nil)
	if _, _, err := env.client.ApplyNow(context.Background(), txn(1), 1); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("without an oracle: %v, want errors.ErrUnsupported", err)
	}
	env = newStoreEnv(t, &ServiceOptions{Oracle: &fixedOracle{ts: 150}}, nil)
	for _, tc := range []struct {
		name  string
		txn   *store.RowTxn
		rel   uint64
		field string
	}{
		{"nil", nil, 1, "txn"},
		{"mutation beyond the transaction's", txn(1), 1 << 1, "Mutations"},
		{"overflow", txn(^uint64(0) - 100), 1, "Mutations[0].Ts"},
	} {
		_, _, err := env.client.ApplyNow(context.Background(), tc.txn, tc.rel)
		var inv *store.InvalidError
		if !errors.As(err, &inv) || inv.Field != tc.field {
			t.Errorf("%s: %v, want an InvalidError on %s", tc.name, err, tc.field)
		}
	}
	cells, err := env.db.ReadRow(context.Background(), "t", []byte("a"), []store.Column{c}, nil)
	if err != nil || len(cells) != 0 {
		t.Fatalf("cells after refused calls: %+v, %v; want none", cells, err)
	}
}
