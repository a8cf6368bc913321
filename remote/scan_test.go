package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// countingStore counts the Scan calls a service makes: one per page, two
// for a page that finishes a column the previous page stopped in.
type countingStore struct {
	store.Store
	scans atomic.Int64
}

func (c *countingStore) Scan(ctx context.Context, req store.ScanRequest) iter.Seq2[store.Cell, error] {
	c.scans.Add(1)
	return c.Store.Scan(ctx, req)
}

// fill writes rows*cols cells of one version each, plus a notify cell per
// row, with values of size valueLen.
func fill(t testing.TB, s store.Store, table string, rows, cols, valueLen int) {
	t.Helper()
	for r := range rows {
		txn := &store.RowTxn{Table: table, Row: fmt.Appendf(nil, "row\x00%05d\xff", r), NoSync: true}
		for c := range cols {
			fam := "f"
			if c%3 == 2 {
				fam = "g"
			}
			v := bytes.Repeat([]byte{byte(r), 0, 0xff}, valueLen/3+1)[:valueLen]
			txn.Mutations = append(txn.Mutations, store.Mutation{Column: col(fam, fmt.Sprintf("q%03d", c)), Ts: uint64(1 + c%4), Value: v})
		}
		txn.Mutations = append(txn.Mutations, store.Mutation{Column: col(sideFamily, "n"), Ts: 7})
		if res, err := s.Apply(bg, txn); err != nil || !res.Applied {
			t.Fatalf("fill: %+v %v", res, err)
		}
	}
}

func TestScanManyPages(t *testing.T) {
	ns := startNATS(t)
	db := openMem(t)
	cs := &countingStore{Store: db}
	svc, err := ServeStore(connect(t, ns), cs, quietService(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	c, err := NewStore(connect(t, ns), &ClientOptions{ScanPageCells: 100})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, db, "big\x00", 300, 10, 5)
	for _, req := range []store.ScanRequest{
		{Table: "big\x00"},
		{Table: "big\x00", Filter: store.ColumnFilter{Families: []string{"g"}, Columns: []store.Column{col("f", "q004")}}},
		{Table: "big\x00", Start: []byte("row\x0000100"), End: []byte("row\x0000250"),
			After: &store.Position{Row: []byte("row\x0000120\xff"), Column: col("f", "q005")}},
		{Table: "big\x00", Spans: []store.Span{{MaxTs: 3, MinTs: 2}}},
		{Table: "big\x00", Group: sideGroup},
	} {
		cs.scans.Store(0)
		want, err := storetest.Collect(db.Scan(bg, req))
		if err != nil {
			t.Fatal(err)
		}
		got, err := storetest.Collect(c.Scan(bg, req))
		if err != nil {
			t.Fatal(err)
		}
		if err := storetest.CellsEqual(want, got); err != nil {
			t.Fatalf("Scan(%+v): %v", req, err)
		}
		pages := cs.scans.Load()
		if wantPages := int64(max(1, (len(want)+99)/100)); pages != wantPages {
			t.Errorf("Scan(%+v): %d cells in %d pages, want %d", req, len(want), pages, wantPages)
		}
	}
}

func TestScanStopsWhenConsumerBreaks(t *testing.T) {
	ns := startNATS(t)
	db := openMem(t)
	cs := &countingStore{Store: db}
	svc, err := ServeStore(connect(t, ns), cs, quietService(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	c, err := NewStore(connect(t, ns), &ClientOptions{ScanPageCells: 10})
	if err != nil {
		t.Fatal(err)
	}
	fill(t, db, "t", 50, 4, 3)
	n := 0
	for _, err := range c.Scan(bg, store.ScanRequest{Table: "t"}) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 25 {
			break
		}
	}
	if got := cs.scans.Load(); got != 3 {
		t.Errorf("%d pages fetched for 25 cells of pages of 10, want 3", got)
	}
	// Nothing is fetched until the sequence is ranged over.
	_ = c.Scan(bg, store.ScanRequest{Table: "t"})
	if got := cs.scans.Load(); got != 3 {
		t.Errorf("unconsumed Scan fetched a page")
	}
}

// TestScanPagesByBytes checks that large values split pages by size (the
// NATS max payload is 1 MiB) and that a column longer than a page resumes
// inside it.
func TestScanPagesByBytes(t *testing.T) {
	env := newStoreEnv(t, nil, nil)
	big := bytes.Repeat([]byte{0xff, 0}, 100<<10) // 200 KiB
	for ts := uint64(1); ts <= 12; ts++ {
		for _, row := range []string{"a", "b"} {
			if _, err := env.db.Apply(bg, &store.RowTxn{Table: "t", Row: []byte(row),
				Mutations: []store.Mutation{{Column: col("f", "v"), Ts: ts, Value: append([]byte{byte(ts)}, big...)}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, spans := range [][]store.Span{nil, {{MaxTs: 10, MinTs: 3, Limit: 6}, {MaxTs: 2, MinTs: 1}}} {
		req := store.ScanRequest{Table: "t", Spans: spans}
		want, _ := storetest.Collect(env.db.Scan(bg, req))
		got, err := storetest.Collect(env.client.Scan(bg, req))
		if err != nil {
			t.Fatal(err)
		}
		if err := storetest.CellsEqual(want, got); err != nil {
			t.Fatal(err)
		}
	}
	// A ReadRow answer larger than a message (12 versions of 200 KiB)
	// comes in parts.
	want, _ := env.db.ReadRow(bg, "t", []byte("a"), []store.Column{col("f", "v")}, nil)
	got, err := env.client.ReadRow(bg, "t", []byte("a"), []store.Column{col("f", "v")}, nil)
	if err != nil {
		t.Fatalf("ReadRow of %d cells of 200 KiB: %v", len(want), err)
	}
	if err := storetest.CellsEqual(want, got); err != nil {
		t.Fatal(err)
	}
}

func TestScanContext(t *testing.T) {
	env := newStoreEnv(t, nil, &ClientOptions{ScanPageCells: 5})
	fill(t, env.db, "t", 20, 3, 3)
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	n := 0
	var last error
	for _, err := range env.client.Scan(ctx, store.ScanRequest{Table: "t"}) {
		if err != nil {
			last = err
			break
		}
		if n++; n == 7 {
			cancel()
		}
	}
	if !errors.Is(last, context.Canceled) || n != 10 {
		t.Errorf("after cancel: %d cells, err %v; want the page's 10 cells then context.Canceled", n, last)
	}
}
