package remote

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// readCountingStore counts the read calls a service makes of its store.
type readCountingStore struct {
	store.Store
	readRow, readRows atomic.Int64
}

func (c *readCountingStore) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	c.readRow.Add(1)
	return c.Store.ReadRow(ctx, table, row, cols, spans)
}

func (c *readCountingStore) ReadRows(ctx context.Context, reads []store.RowRead) ([][]store.Cell, error) {
	c.readRows.Add(1)
	return c.Store.ReadRows(ctx, reads)
}

// subjectCounter counts the messages published on the store service's
// subjects (requests, and parts of messages in parts), as a NATS
// subscriber of its own sees them.
type subjectCounter struct {
	nc  *nats.Conn
	sub *nats.Subscription
}

func countSubjects(t testing.TB, ns *natsserver.Server) *subjectCounter {
	t.Helper()
	nc := connect(t, ns)
	sub, err := nc.SubscribeSync(DefaultPrefix + ".store.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &subjectCounter{nc: nc, sub: sub}
}

// take returns, per subject (part subjects as "<prefix>.store.part"), the
// messages published since the last take. Every message a client's call
// published reached the server before the service answered it, so once a
// round trip to the server completes, it is queued on sub.
func (c *subjectCounter) take(t testing.TB) map[string]int {
	t.Helper()
	if err := c.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for {
		n, _, err := c.sub.Pending()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return counts
		}
		m, err := c.sub.NextMsg(0)
		if err != nil {
			t.Fatal(err)
		}
		subj := m.Subject
		if p := DefaultPrefix + ".store.part."; strings.HasPrefix(subj, p) {
			subj = p[:len(p)-1]
		}
		counts[subj]++
	}
}

// TestReadRowsOneRoundTrip: a ReadRows call of many rows is one request
// and one answer on the wire, and one ReadRows call of the service's
// store; the same rows read with ReadRow take one request each.
func TestReadRowsOneRoundTrip(t *testing.T) {
	ns := startNATS(t)
	db := openMem(t)
	cs := &readCountingStore{Store: db}
	_, nc, c := serveClient(t, ns, cs, nil, nil)
	counter := countSubjects(t, ns)
	const n = 50
	data := col("f", "v")
	reads := make([]store.RowRead, n)
	for i := range reads {
		table := []string{"users", "index"}[i%2]
		row := fmt.Appendf(nil, "row%03d", n-i) // not in key order
		if _, err := db.Apply(bg, &store.RowTxn{Table: table, Row: row, NoSync: true,
			Mutations: []store.Mutation{{Column: data, Ts: 1, Value: fmt.Appendf(nil, "%s/%s", table, row)}}}); err != nil {
			t.Fatal(err)
		}
		reads[i] = store.RowRead{Table: table, Row: row, Columns: []store.Column{data}}
	}

	before := nc.Stats()
	for _, r := range reads {
		if _, err := c.ReadRow(bg, r.Table, r.Row, r.Columns, r.Spans); err != nil {
			t.Fatal(err)
		}
	}
	after := nc.Stats()
	if got := counter.take(t); got[DefaultPrefix+".store.readrow"] != n || after.OutMsgs-before.OutMsgs != n {
		t.Fatalf("%d ReadRow calls: %v on the wire, %d messages sent; want %d requests", n, got, after.OutMsgs-before.OutMsgs, n)
	}

	before = nc.Stats()
	res, err := c.ReadRows(bg, reads)
	if err != nil {
		t.Fatal(err)
	}
	after = nc.Stats()
	got := counter.take(t)
	if len(got) != 1 || got[DefaultPrefix+".store.readrows"] != 1 {
		t.Errorf("ReadRows of %d rows: %v on the wire, want one request", n, got)
	}
	if sent, recv := after.OutMsgs-before.OutMsgs, after.InMsgs-before.InMsgs; sent != 1 || recv != 1 {
		t.Errorf("ReadRows of %d rows: the client sent %d messages and received %d, want 1 and 1", n, sent, recv)
	}
	if cs.readRows.Load() != 1 || cs.readRow.Load() != n {
		t.Errorf("the service called ReadRows %d times and ReadRow %d times, want 1 and %d", cs.readRows.Load(), cs.readRow.Load(), n)
	}
	for i, r := range reads {
		if len(res[i]) != 1 || string(res[i][0].Value) != fmt.Sprintf("%s/%s", r.Table, r.Row) || !bytes.Equal(res[i][0].Row, r.Row) {
			t.Fatalf("result %d: %v, want the cell of %s/%s", i, res[i], r.Table, r.Row)
		}
	}

	// An empty call sends nothing.
	before = nc.Stats()
	if res, err := c.ReadRows(bg, nil); err != nil || res != nil {
		t.Fatalf("empty call: %v, %v", res, err)
	}
	if after := nc.Stats(); after.OutMsgs != before.OutMsgs {
		t.Errorf("an empty call sent %d messages", after.OutMsgs-before.OutMsgs)
	}
}

// TestReadRowsLarge: with the default 1 MiB max payload, a ReadRows whose
// answer is several megabytes (one read alone over 1 MiB, and rows of two
// tables that only together exceed it) and one whose request exceeds
// 1 MiB (many reads of long row keys) are still one request each, carried
// in parts, and return the cells byte for byte.
func TestReadRowsLarge(t *testing.T) {
	ns := startNATS(t)
	if mp := connect(t, ns).MaxPayload(); mp != 1<<20 {
		t.Fatalf("the NATS server's max payload is %d, not the default 1 MiB", mp)
	}
	env := newStoreEnvOn(t, ns, slowService(), slowClient())
	counter := countSubjects(t, ns)
	v := col("f", "v")
	var versions []store.Mutation
	for ts := uint64(1); ts <= 3; ts++ {
		versions = append(versions, store.Mutation{Column: v, Ts: ts, Value: bigValue(ts, 600_000)})
	}
	if _, err := env.db.Apply(bg, &store.RowTxn{Table: "big", Row: []byte("versions"), NoSync: true, Mutations: versions}); err != nil {
		t.Fatal(err)
	}
	for i, table := range []string{"a", "b", "a"} {
		row := fmt.Appendf(nil, "r%d", i)
		if _, err := env.db.Apply(bg, &store.RowTxn{Table: table, Row: row, NoSync: true,
			Mutations: []store.Mutation{{Column: v, Ts: 5, Value: bigValue(uint64(10+i), 450_000)}}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, reads []store.RowRead, wantBytes int) {
		t.Helper()
		got, err := env.client.ReadRows(bg, reads)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		counts := counter.take(t)
		if counts[DefaultPrefix+".store.readrows"] != 1 || counts[DefaultPrefix+".store.part"] == 0 {
			t.Errorf("%s: %v on the wire, want one readrows request and parts", what, counts)
		}
		want, err := env.db.ReadRows(bg, reads)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for i := range want {
			if err := storetest.CellsEqual(want[i], got[i]); err != nil {
				t.Fatalf("%s: result %d: %v", what, i, err)
			}
			for _, c := range got[i] {
				total += len(c.Value)
			}
		}
		if total < wantBytes {
			t.Fatalf("%s: %d bytes of values, want at least %d", what, total, wantBytes)
		}
	}
	check("one read over 1 MiB", []store.RowRead{{Table: "big", Row: []byte("versions"), Columns: []store.Column{v}}}, 1_800_000)
	check("rows of two tables", []store.RowRead{
		{Table: "a", Row: []byte("r2"), Columns: []store.Column{v}},
		{Table: "b", Row: []byte("r1"), Columns: []store.Column{v}},
		{Table: "a", Row: []byte("r0"), Columns: []store.Column{v}},
		{Table: "a", Row: []byte("r1"), Columns: []store.Column{v}}, // absent
	}, 1_350_000)

	// A request over 1 MiB: the most reads a call may carry, of row keys
	// of 1.5 KB, with the large rows among them.
	reads := make([]store.RowRead, store.MaxRowReads)
	for i := range reads {
		reads[i] = store.RowRead{Table: "a", Row: append(bytes.Repeat([]byte{'k'}, 1500), fmt.Sprint(i)...), Columns: []store.Column{v}}
	}
	reads[7] = store.RowRead{Table: "b", Row: []byte("r1"), Columns: []store.Column{v}}
	reads[store.MaxRowReads-1] = store.RowRead{Table: "a", Row: []byte("r0"), Columns: []store.Column{v}}
	check("a request over 1 MiB", reads, 900_000)
}
