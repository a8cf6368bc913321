package remote

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// bigValue returns n pseudo-random bytes determined by seed, so that a
// misplaced or repeated part shows as different bytes.
func bigValue(seed uint64, n int) []byte {
	b := make([]byte, n)
	var s [32]byte
	s[0], s[1] = byte(seed), byte(seed>>8)
	rand.NewChaCha8(s).Read(b)
	return b
}

// readBack reads one cell through the local store and through the client
// and requires both to hold want, byte for byte.
func readBack(t *testing.T, env *storeEnv, table string, row []byte, c store.Column, want []byte) {
	t.Helper()
	local, err := env.db.ReadRow(bg, table, row, []store.Column{c}, []store.Span{{MaxTs: ^uint64(0), Limit: 1}})
	if err != nil || len(local) != 1 || !bytes.Equal(local[0].Value, want) {
		t.Fatalf("stored %q %s: %d cells, err %v, or value differs from the %d bytes written", row, c, len(local), err, len(want))
	}
	got, err := env.client.ReadRow(bg, table, row, []store.Column{c}, []store.Span{{MaxTs: ^uint64(0), Limit: 1}})
	if err != nil {
		t.Fatalf("ReadRow %q %s: %v", row, c, err)
	}
	if len(got) != 1 || !bytes.Equal(got[0].Value, want) || !bytes.Equal(got[0].Row, row) || got[0].Column != c {
		t.Fatalf("ReadRow %q %s: %d cells, or value differs from the %d bytes written", row, c, len(got), len(want))
	}
}

func TestPartsApplyAndReadRow(t *testing.T) {
	env := newStoreEnv(t, slowService(), slowClient())
	v := bigValue(1, 6_000_000)
	big := col("f", "big")
	res, err := env.client.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r1"),
		Checks:    []store.Check{{Column: big, MaxTs: ^uint64(0), Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{{Column: big, Ts: 5, Value: v}}})
	if err != nil || !res.Applied {
		t.Fatalf("Apply of a 6 MB value: %+v %v", res, err)
	}
	readBack(t, env, "t", []byte("r1"), big, v)

	// A failed check returns the conflicting 6 MB cell: an answer in parts.
	res, err = env.client.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r1"),
		Checks:    []store.Check{{Column: big, MaxTs: 10, Expect: store.MustBeAbsent}},
		Mutations: []store.Mutation{{Column: col("f", "x"), Ts: 6, Value: []byte("x")}}})
	if err != nil || res.Applied || res.Conflict == nil || !bytes.Equal(res.Conflict.Value, v) {
		t.Fatalf("Apply failing on the 6 MB cell: applied %v, conflict %v, err %v", res.Applied, res.Conflict != nil, err)
	}

	// Many medium cells, more than a message together.
	txn := &store.RowTxn{Table: "t", Row: []byte("r2")}
	for i := range 48 {
		txn.Mutations = append(txn.Mutations, store.Mutation{Column: col("g", fmt.Sprintf("q%02d", i)), Ts: 3, Value: bigValue(uint64(100+i), 40_000)})
	}
	if res, err := env.client.Apply(bg, txn); err != nil || !res.Applied {
		t.Fatalf("Apply of 48 cells of 40 KB: %+v %v", res, err)
	}
	var cols []store.Column
	for i := range txn.Mutations {
		readBack(t, env, "t", txn.Row, txn.Mutations[i].Column, txn.Mutations[i].Value)
		cols = append(cols, txn.Mutations[i].Column)
	}
	// All of them in one ReadRow answer.
	got, err := env.client.ReadRow(bg, "t", txn.Row, cols, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := env.db.ReadRow(bg, "t", txn.Row, cols, nil)
	if err := storetest.CellsEqual(want, got); err != nil {
		t.Fatal(err)
	}
	if held := env.svc.srv.parts.bytesHeld(); held != 0 {
		t.Errorf("%d bytes still held after every transfer finished", held)
	}
}

// fillMixed writes rows whose cells alternate between small and several
// megabytes, with one column of three large versions, and returns the
// number of large cells.
func fillMixed(t *testing.T, db store.Store, table string, large int) int {
	t.Helper()
	n := 0
	for r := range 4 {
		txn := &store.RowTxn{Table: table, Row: fmt.Appendf(nil, "row%d", r), NoSync: true}
		for c := range 5 {
			size := 10 + c
			if (r+c)%2 == 1 {
				size = large + c*1000
				n++
			}
			txn.Mutations = append(txn.Mutations, store.Mutation{Column: col("f", fmt.Sprintf("c%d", c)), Ts: 2, Value: bigValue(uint64(r*10+c), size)})
		}
		if r == 2 {
			for ts := uint64(1); ts <= 3; ts++ {
				txn.Mutations = append(txn.Mutations, store.Mutation{Column: col("g", "versions"), Ts: ts, Value: bigValue(uint64(1000+ts), large)})
				n++
			}
		}
		if res, err := db.Apply(bg, txn); err != nil || !res.Applied {
			t.Fatalf("fill: %+v %v", res, err)
		}
	}
	return n
}

func TestPartsScan(t *testing.T) {
	ns := startNATS(t)
	env := newStoreEnvOn(t, ns, slowService(), slowClient())
	large := fillMixed(t, env.db, "t", 2_500_000)
	clients := []*StoreClient{env.client}
	for _, cells := range []int{1, 2, 3} {
		c, err := NewStore(connect(t, ns), &ClientOptions{ScanPageCells: cells, RequestTimeout: 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	for _, req := range []store.ScanRequest{
		{Table: "t"},
		{Table: "t", Spans: []store.Span{{MaxTs: 3, MinTs: 2, Limit: 1}, {MaxTs: 1, MinTs: 1}}},
		{Table: "t", After: &store.Position{Row: []byte("row1"), Column: col("f", "c2")}},
	} {
		want, err := storetest.Collect(env.db.Scan(bg, req))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range clients {
			got, err := storetest.Collect(c.Scan(bg, req))
			if err != nil {
				t.Fatalf("Scan(%+v), pages of %d cells: %v", req, c.c.cfg.ScanPageCells, err)
			}
			if err := storetest.CellsEqual(want, got); err != nil {
				t.Fatalf("Scan(%+v), pages of %d cells: %v", req, c.c.cfg.ScanPageCells, err)
			}
		}
	}
	if large < 10 {
		t.Fatalf("only %d large cells written", large)
	}
}

// TestPartsOneLargeCellPerPage: a cell larger than the page budget comes
// alone on its page, small cells around it share theirs.
func TestPartsOneLargeCellPerPage(t *testing.T) {
	ns := startNATS(t)
	db := openMem(t)
	cs := &countingStore{Store: db}
	svc, err := ServeStore(connect(t, ns), cs, quietService(slowService()))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	c, err := NewStore(connect(t, ns), slowClient())
	if err != nil {
		t.Fatal(err)
	}
	txn := &store.RowTxn{Table: "t", Row: []byte("r")}
	for i := range 9 {
		v := []byte{byte(i)}
		if i%3 == 1 {
			v = bigValue(uint64(i), 1_500_000)
		}
		txn.Mutations = append(txn.Mutations, store.Mutation{Column: col("f", fmt.Sprint(i)), Ts: 1, Value: v})
	}
	if _, err := db.Apply(bg, txn); err != nil {
		t.Fatal(err)
	}
	want, _ := storetest.Collect(db.Scan(bg, store.ScanRequest{Table: "t"}))
	got, err := storetest.Collect(c.Scan(bg, store.ScanRequest{Table: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := storetest.CellsEqual(want, got); err != nil {
		t.Fatal(err)
	}
	// [0] [1: large] [2 3] [4: large] [5 6] [7: large] [8]: a page stops
	// before a cell that does not fit, so every large cell starts a page
	// and is alone on it.
	if pages := cs.scans.Load(); pages != 7 {
		t.Errorf("%d pages, want 7", pages)
	}
}

func TestPartsConcurrent(t *testing.T) {
	ns := startNATS(t)
	env := newStoreEnvOn(t, ns, slowService(), slowClient())
	second, err := NewStore(connect(t, ns), slowClient())
	if err != nil {
		t.Fatal(err)
	}
	clients := []*StoreClient{env.client, second}
	const workers, rounds = 6, 3
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			cl := clients[w%2]
			row := fmt.Appendf(nil, "w%d", w)
			for i := range rounds {
				v := bigValue(uint64(w*100+i), 1_500_000+w*400_000+i)
				c := col("f", fmt.Sprint(i))
				if res, err := cl.Apply(bg, &store.RowTxn{Table: "t", Row: row,
					Mutations: []store.Mutation{{Column: c, Ts: uint64(i + 1), Value: v}}}); err != nil || !res.Applied {
					errs <- fmt.Errorf("worker %d round %d: Apply: %+v %v", w, i, res, err)
					return
				}
				cells, err := cl.ReadRow(bg, "t", row, []store.Column{c}, nil)
				if err != nil || len(cells) != 1 || !bytes.Equal(cells[0].Value, v) {
					errs <- fmt.Errorf("worker %d round %d: ReadRow: %d cells, %v, or the value differs", w, i, len(cells), err)
					return
				}
				scanned, err := storetest.Collect(cl.Scan(bg, store.ScanRequest{Table: "t", Start: row, End: append(row, 0)}))
				if err != nil || len(scanned) != i+1 || !bytes.Equal(scanned[i].Value, v) {
					errs <- fmt.Errorf("worker %d round %d: Scan: %d cells, %v, or the value differs", w, i, len(scanned), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// msgSpy counts the messages of a NATS server, on a connection of its
// own: requests to the endpoints, parts, and answers.
type msgSpy struct {
	t   *testing.T
	nc  *nats.Conn
	sub *nats.Subscription
}

func newSpy(t *testing.T, ns *natsserver.Server) *msgSpy {
	nc := connect(t, ns)
	sub, err := nc.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &msgSpy{t: t, nc: nc, sub: sub}
}

// counts returns the messages seen since the last call, by subject kind.
// Everything the caller's completed operations sent reached the NATS
// server before the sentinel this publishes, so the spy has seen it when
// the sentinel arrives.
func (s *msgSpy) counts() (endpoint, part, answer int) {
	s.t.Helper()
	if err := s.nc.Publish("spy.end", nil); err != nil {
		s.t.Fatal(err)
	}
	for {
		msg, err := s.sub.NextMsg(10 * time.Second)
		if err != nil {
			s.t.Fatalf("spy: %v", err)
		}
		switch subj := msg.Subject; {
		case subj == "spy.end":
			return
		case strings.HasPrefix(subj, "trickle.store.part."):
			part++
		case strings.HasPrefix(subj, "trickle.store."):
			endpoint++
		case strings.HasPrefix(subj, "_INBOX."):
			answer++
		}
	}
}

// TestPartsFastPath: a message that fits takes one request and one
// answer, as before parts existed; a larger one takes one request per
// part and as many answers, and nothing is left behind.
func TestPartsFastPath(t *testing.T) {
	ns := startNATS(t)
	env := newStoreEnvOn(t, ns, slowService(), slowClient())
	spy := newSpy(t, ns)
	c := col("f", "v")
	if _, err := env.client.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("small"), Mutations: []store.Mutation{{Column: c, Ts: 1, Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	if ep, part, ans := spy.counts(); ep != 1 || part != 0 || ans != 1 {
		t.Errorf("small Apply: %d requests, %d parts, %d answers; want 1, 0, 1", ep, part, ans)
	}
	// Just below and just above the max payload.
	limit := int(env.client.c.nc.MaxPayload())
	for _, tc := range []struct {
		size        int // of the Apply request
		parts       int // of the Apply request
		answerParts int // of the ReadRow answer, about as large
	}{{limit - 200, 1, 1}, {limit + 1, 2, 1}, {limit + 200, 2, 2}, {3*limit - 2000, 3, 3}, {3*limit + 2000, 4, 4}} {
		txn := &store.RowTxn{Table: "t", Row: []byte("big"), Mutations: []store.Mutation{{Column: c, Ts: 1, Value: []byte{}}}}
		size := func() int {
			var e encoder
			e.header(5 * time.Minute) // what the client sends (slow), its context having no deadline
			e.applyReq(txn)
			return len(e.b)
		}
		n := tc.size - size()
		txn.Mutations[0].Value = bigValue(3, n)
		txn.Mutations[0].Value = bigValue(3, n+tc.size-size()) // less what the length prefix grew
		if got := size(); got != tc.size {
			t.Fatalf("request of %d bytes, want %d", got, tc.size)
		}
		if res, err := env.client.Apply(bg, txn); err != nil || !res.Applied {
			t.Fatalf("Apply of a %d-byte request: %+v %v", tc.size, res, err)
		}
		if ep, part, ans := spy.counts(); ep != 1 || part != tc.parts-1 || ans != tc.parts {
			t.Errorf("Apply of a %d-byte request: %d requests, %d parts, %d answers; want 1, %d, %d",
				tc.size, ep, part, ans, tc.parts-1, tc.parts)
		}
		got, err := env.client.ReadRow(bg, "t", []byte("big"), []store.Column{c}, []store.Span{{MaxTs: 1, MinTs: 1}})
		if err != nil || len(got) != 1 || !bytes.Equal(got[0].Value, txn.Mutations[0].Value) {
			t.Fatalf("ReadRow of the %d-byte value: %d cells, %v", len(txn.Mutations[0].Value), len(got), err)
		}
		// The answer is about as large as the request, a little smaller:
		// one message, or a download and pulls for the rest.
		if ep, part, ans := spy.counts(); ep != 1 || part != tc.answerParts-1 || ans != tc.answerParts {
			t.Errorf("ReadRow of the %d-byte value: %d requests, %d pulls, %d answers; want 1, %d, %d",
				len(txn.Mutations[0].Value), ep, part, ans, tc.answerParts-1, tc.answerParts)
		}
	}
}

// TestPartsSmallMaxPayload runs large requests through a NATS server
// whose max payload is 64 KiB, so that a message takes dozens of parts.
func TestPartsSmallMaxPayload(t *testing.T) {
	ns := startNATSMaxPayload(t, 64<<10)
	env := newStoreEnvOn(t, ns, slowService(), slowClient())
	if mp := env.client.c.nc.MaxPayload(); mp != 64<<10 {
		t.Fatalf("max payload %d, want 64 KiB", mp)
	}
	spy := newSpy(t, ns)
	v := bigValue(7, 3_000_000)
	c := col("f", "v")
	if res, err := env.client.Apply(bg, &store.RowTxn{Table: "t", Row: []byte("r"), Mutations: []store.Mutation{{Column: c, Ts: 1, Value: v}}}); err != nil || !res.Applied {
		t.Fatalf("Apply: %+v %v", res, err)
	}
	if _, part, _ := spy.counts(); part < 3_000_000/(64<<10) {
		t.Errorf("a 3 MB request took %d further parts through a 64 KiB max payload", part)
	}
	readBack(t, env, "t", []byte("r"), c, v)
	large := fillMixed(t, env.db, "mixed", 200_000)
	for _, req := range []store.ScanRequest{{Table: "mixed"}, {Table: "mixed", Spans: []store.Span{{MaxTs: 2, MinTs: 2}}}} {
		want, _ := storetest.Collect(env.db.Scan(bg, req))
		got, err := storetest.Collect(env.client.Scan(bg, req))
		if err != nil {
			t.Fatal(err)
		}
		if err := storetest.CellsEqual(want, got); err != nil {
			t.Fatalf("Scan(%+v) over %d large cells: %v", req, large, err)
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			row := fmt.Appendf(nil, "w%d", w)
			v := bigValue(uint64(50+w), 500_000+w)
			if res, err := env.client.Apply(bg, &store.RowTxn{Table: "t", Row: row, Mutations: []store.Mutation{{Column: c, Ts: 1, Value: v}}}); err != nil || !res.Applied {
				t.Errorf("worker %d: Apply: %+v %v", w, res, err)
				return
			}
			got, err := env.client.ReadRow(bg, "t", row, []store.Column{c}, nil)
			if err != nil || len(got) != 1 || !bytes.Equal(got[0].Value, v) {
				t.Errorf("worker %d: ReadRow: %d cells, %v, or the value differs", w, len(got), err)
			}
		})
	}
	wg.Wait()
}

// BenchmarkRemoteApplyLarge measures the round trip of a row transaction
// with one 6 MB value, sent in parts through the default 1 MiB max
// payload.
func BenchmarkRemoteApplyLarge(b *testing.B) {
	env := newStoreEnv(b, slowService(), slowClient())
	v := bigValue(1, 6_000_000)
	b.SetBytes(int64(len(v)))
	var ts uint64
	for b.Loop() {
		ts++
		res, err := env.client.Apply(bg, &store.RowTxn{Table: "bench", Row: []byte("r"), NoSync: true,
			Mutations: []store.Mutation{{Column: col("f", "v"), Ts: ts, Value: v}}})
		if err != nil || !res.Applied {
			b.Fatalf("%+v %v", res, err)
		}
	}
}
