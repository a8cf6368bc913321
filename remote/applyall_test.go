package remote

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/trickle-dev/trickle/store"
)

// applyCountingStore counts the row transaction calls a service makes of
// its store.
type applyCountingStore struct {
	store.Store
	apply, applyAll atomic.Int64
}

func (c *applyCountingStore) Apply(ctx context.Context, txn *store.RowTxn) (store.RowResult, error) {
	c.apply.Add(1)
	return c.Store.Apply(ctx, txn)
}

func (c *applyCountingStore) ApplyAll(ctx context.Context, txns []*store.RowTxn) ([]store.RowResult, error) {
	c.applyAll.Add(1)
	return c.Store.ApplyAll(ctx, txns)
}

// prewrites returns n row transactions like a transaction's prewrites:
// each on its own row (rows of two tables, not in key order) checks that
// the row has no lock and writes a lock and a value of valueSize bytes.
func prewrites(n, valueSize int) []*store.RowTxn {
	txns := make([]*store.RowTxn, n)
	for i := range txns {
		table := []string{"users", "index"}[i%2]
		row := fmt.Appendf(nil, "row%04d", n-i)
		txns[i] = &store.RowTxn{Table: table, Row: row, NoSync: true,
			Checks: []store.Check{{Column: col("f", "lock"), MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
			Mutations: []store.Mutation{
				{Column: col("f", "lock"), Ts: 10, Value: []byte("primary")},
				{Column: col("f", "v"), Ts: 10, Value: bigValue(uint64(i), valueSize)},
			}}
	}
	return txns
}

// checkWritten requires every mutation of txns to be in db, byte for byte.
func checkWritten(t *testing.T, db store.Store, txns []*store.RowTxn) {
	t.Helper()
	for i, txn := range txns {
		for _, m := range txn.Mutations {
			got, err := db.ReadRow(bg, txn.Table, txn.Row, []store.Column{m.Column}, []store.Span{{MinTs: m.Ts, MaxTs: m.Ts}})
			if err != nil || len(got) != 1 || !bytes.Equal(got[0].Value, m.Value) {
				t.Fatalf("txns[%d] %s/%s: %s@%d: %d cells, err %v, or not the %d bytes written", i, txn.Table, txn.Row, m.Column, m.Ts, len(got), err, len(m.Value))
			}
		}
	}
}

// TestApplyAllOneRoundTrip: an ApplyAll of many row transactions is one
// request and one answer on the wire, and one ApplyAll call of the
// service's store; the same row transactions with Apply take one request
// and one store call each.
func TestApplyAllOneRoundTrip(t *testing.T) {
	ns := startNATS(t)
	db := openMem(t)
	cs := &applyCountingStore{Store: db}
	_, nc, c := serveClient(t, ns, cs, nil, nil)
	counter := countSubjects(t, ns)
	const n = 50
	txns := prewrites(n, 100)
	before := nc.Stats()
	res, err := c.ApplyAll(bg, txns)
	if err != nil {
		t.Fatal(err)
	}
	after := nc.Stats()
	got := counter.take(t)
	if len(got) != 1 || got[DefaultPrefix+".store.applyall"] != 1 {
		t.Errorf("ApplyAll of %d row transactions: %v on the wire, want one request on %s.store.applyall", n, got, DefaultPrefix)
	}
	if sent, recv := after.OutMsgs-before.OutMsgs, after.InMsgs-before.InMsgs; sent != 1 || recv != 1 {
		t.Errorf("ApplyAll of %d row transactions: the client sent %d messages and received %d, want 1 and 1", n, sent, recv)
	}
	if cs.applyAll.Load() != 1 || cs.apply.Load() != 0 {
		t.Errorf("the service called ApplyAll %d times and Apply %d times, want 1 and 0", cs.applyAll.Load(), cs.apply.Load())
	}
	if len(res) != n {
		t.Fatalf("%d results for %d row transactions", len(res), n)
	}
	for i, r := range res {
		if !r.Applied {
			t.Fatalf("txns[%d]: %+v", i, r)
		}
	}
	checkWritten(t, db, txns)

	// The same prewrites again, one Apply each: every one fails on the
	// lock the first round wrote.
	for i, txn := range txns {
		r, err := c.Apply(bg, txn)
		if err != nil || r.Applied || r.Conflict == nil || string(r.Conflict.Value) != "primary" {
			t.Fatalf("Apply(txns[%d]) after ApplyAll: %+v %v, want its lock as the conflict", i, r, err)
		}
	}
	if got := counter.take(t); got[DefaultPrefix+".store.apply"] != n || cs.apply.Load() != n || cs.applyAll.Load() != 1 {
		t.Errorf("%d Apply calls: %v on the wire, %d Apply and %d ApplyAll calls of the store", n, got, cs.apply.Load(), cs.applyAll.Load())
	}

	// An empty call sends nothing.
	before = nc.Stats()
	if res, err := c.ApplyAll(bg, nil); err != nil || res != nil {
		t.Fatalf("empty call: %v, %v", res, err)
	}
	if after := nc.Stats(); after.OutMsgs != before.OutMsgs {
		t.Errorf("an empty call sent %d messages", after.OutMsgs-before.OutMsgs)
	}
}

// TestApplyAllInParts: through a NATS server whose max payload is 64
// KiB, an ApplyAll whose request is several times that (and whose answer,
// carrying a large conflicting cell, is too) is still one applyall
// request, carried in parts, with every cell written byte for byte.
func TestApplyAllInParts(t *testing.T) {
	ns := startNATSMaxPayload(t, 64<<10)
	env := newStoreEnvOn(t, ns, slowService(), slowClient())
	if mp := env.client.c.nc.MaxPayload(); mp != 64<<10 {
		t.Fatalf("max payload %d, want 64 KiB", mp)
	}
	counter := countSubjects(t, ns)
	// A cell larger than a message, which one of the row transactions
	// will find in its way.
	big := bigValue(99, 200_000)
	blocked := store.Mutation{Column: col("f", "lock"), Ts: 3, Value: big}
	if _, err := env.db.Apply(bg, &store.RowTxn{Table: "users", Row: []byte("row0040"), Mutations: []store.Mutation{blocked}}); err != nil {
		t.Fatal(err)
	}
	txns := prewrites(40, 8_000) // 320 KB of values
	res, err := env.client.ApplyAll(bg, txns)
	if err != nil {
		t.Fatal(err)
	}
	counts := counter.take(t)
	if counts[DefaultPrefix+".store.applyall"] != 1 || counts[DefaultPrefix+".store.part"] < 320_000/(64<<10) {
		t.Errorf("ApplyAll of 320 KB: %v on the wire, want one applyall request and its parts", counts)
	}
	for i, r := range res {
		if i == 0 {
			if r.Applied || r.Conflict == nil || !bytes.Equal(r.Conflict.Value, big) || r.Conflict.Ts != 3 {
				t.Fatalf("txns[0], whose row holds a 200 KB lock: applied %v, conflict %v", r.Applied, r.Conflict != nil)
			}
			continue
		}
		if !r.Applied {
			t.Fatalf("txns[%d]: %+v", i, r)
		}
	}
	checkWritten(t, env.db, txns[1:])
	checkWritten(t, env.client, txns[1:])
	if held := env.svc.srv.parts.bytesHeld(); held != 0 {
		t.Errorf("%d bytes still held after every transfer finished", held)
	}
}
