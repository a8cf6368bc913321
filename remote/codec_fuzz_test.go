package remote

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/trickle-dev/trickle/store"
	"github.com/trickle-dev/trickle/store/storetest"
)

// The fuzz targets feed garbage to every decoder: it must fail cleanly
// (ErrProtocol), never panic, and whatever decodes must survive a
// re-encode/decode round trip unchanged. The seeds, run by plain go test,
// are valid messages and mutilations of them.

func sampleTxn() *store.RowTxn {
	return &store.RowTxn{Table: "t\x00", Row: []byte{0, 0xff}, NoSync: true, Snapshot: 1<<60 | 7,
		Checks: []store.Check{
			{Column: col("f", "\xff"), MinTs: 1, MaxTs: ^uint64(0), ValuePrefix: []byte{}, Expect: store.MustExist},
			{Column: col("lock", ""), MaxTs: 9},
		},
		Mutations: []store.Mutation{
			{Column: col("f", "q"), Ts: 1 << 50, Value: []byte("v")},
			{Column: col("lock", ""), Ts: 3, Delete: true, IfValuePrefix: []byte("me")},
			{Column: col("f", "e"), Ts: 4, Value: []byte{}, IfValuePrefix: []byte{}},
			{Column: col("lock", "2"), Ts: 5, Delete: true, SingleDelete: true, IfValuePrefix: []byte("me")},
		}}
}

// addSeeds adds msg, truncations of it and a few corruptions.
func addSeeds(f *testing.F, msg []byte) {
	f.Add(msg)
	for _, n := range []int{0, 1, 2, len(msg) / 2, len(msg) - 1} {
		if n >= 0 && n < len(msg) {
			f.Add(msg[:n])
		}
	}
	for _, i := range []int{0, 1, 3, len(msg) / 3, len(msg) - 2} {
		if i >= 0 && i < len(msg) {
			bad := bytes.Clone(msg)
			bad[i] ^= 0xff
			f.Add(bad)
		}
	}
	f.Add(append(bytes.Clone(msg), 0))
}

// fuzzRoundTrip decodes data with dec; if that works, the value must
// encode to bytes that decode and re-encode to the same bytes.
func fuzzRoundTrip[T any](t *testing.T, data []byte, dec func(*decoder) T, enc func(*encoder, T)) {
	d := newDecoder(data)
	v := dec(&d)
	if err := d.finish(); err != nil {
		if !errors.Is(err, ErrProtocol) {
			t.Fatalf("decode error %v does not wrap ErrProtocol", err)
		}
		return
	}
	var e1 encoder
	enc(&e1, v)
	d2 := newDecoder(e1.b)
	v2 := dec(&d2)
	if err := d2.finish(); err != nil {
		t.Fatalf("re-encoded message does not decode: %v", err)
	}
	var e2 encoder
	enc(&e2, v2)
	if !bytes.Equal(e1.b, e2.b) {
		t.Fatalf("round trip changed the message:\n%x\n%x", e1.b, e2.b)
	}
}

func FuzzApplyReq(f *testing.F) {
	var e encoder
	e.header(time.Second)
	e.applyReq(sampleTxn())
	addSeeds(f, e.b)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(d *decoder) *store.RowTxn { d.header(); return d.applyReq() },
			func(e *encoder, txn *store.RowTxn) { e.header(0); e.applyReq(txn) })
	})
}

func FuzzApplyResp(f *testing.F) {
	var e encoder
	e.applyResp(store.RowResult{FailedCheck: 1, Conflict: &store.Cell{Row: []byte{0}, Column: col("f", "\xff"), Ts: 7, Value: []byte("x")}})
	addSeeds(f, e.b)
	e = encoder{}
	e.applyResp(store.RowResult{Applied: true, FailedCheck: -1})
	addSeeds(f, e.b)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, (*decoder).applyResp, (*encoder).applyResp)
	})
}

func FuzzApplyAllReq(f *testing.F) {
	second := sampleTxn()
	second.Table, second.Row, second.NoSync = "u", []byte("r"), false
	var e encoder
	e.header(time.Second)
	e.applyAllReq([]*store.RowTxn{sampleTxn(), second, {Table: "t", Row: []byte{1}}})
	addSeeds(f, e.b)
	e = encoder{}
	e.header(0)
	e.applyAllReq(nil)
	addSeeds(f, e.b)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(d *decoder) []*store.RowTxn { d.header(); return d.applyAllReq() },
			func(e *encoder, txns []*store.RowTxn) { e.header(0); e.applyAllReq(txns) })
		// Whatever decodes holds no nil row transaction: the service
		// hands it to its store as it is.
		d := newDecoder(data)
		d.header()
		txns := d.applyAllReq()
		if d.finish() != nil {
			return
		}
		for i, txn := range txns {
			if txn == nil {
				t.Fatalf("decoded a nil txns[%d]", i)
			}
		}
	})
}

// applyAllResults is the number of row transactions the ApplyAll answers
// of FuzzApplyAllResp answer.
const applyAllResults = 3

func FuzzApplyAllResp(f *testing.F) {
	var e encoder
	e.applyAllResp([]store.RowResult{
		{Applied: true, FailedCheck: -1},
		{FailedCheck: 1, Conflict: &store.Cell{Row: []byte{0}, Column: col("f", "\xff"), Ts: 7, Value: []byte("x")}},
		{FailedCheck: 0},
	})
	addSeeds(f, e.b)
	e = encoder{}
	e.applyAllResp([]store.RowResult{{Applied: true, FailedCheck: -1}, {Applied: true, FailedCheck: -1}}) // one short
	addSeeds(f, e.b)
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := func(d *decoder) []store.RowResult { return d.applyAllResp(applyAllResults) }
		fuzzRoundTrip(t, data, dec, (*encoder).applyAllResp)
		// Whatever decodes has exactly one result per row transaction.
		d := newDecoder(data)
		res := dec(&d)
		if d.finish() == nil && len(res) != applyAllResults {
			t.Fatalf("%d results for %d row transactions", len(res), applyAllResults)
		}
	})
}

func FuzzReadRowReq(f *testing.F) {
	var e encoder
	e.header(0)
	e.readRowReq("t", []byte{0xff}, []store.Column{col("f", ""), col("g", "\x00")}, []store.Span{{MaxTs: 9, MinTs: 2, Limit: -1}})
	addSeeds(f, e.b)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(d *decoder) readRowReq { d.header(); return d.readRowReq() },
			func(e *encoder, r readRowReq) { e.header(0); e.readRowReq(r.table, r.row, r.cols, r.spans) })
	})
}

func FuzzReadRowResp(f *testing.F) {
	cols := []store.Column{col("f", ""), col("g", "\x00")}
	var e encoder
	e.readRowResp([]store.Cell{{Ts: 3, Value: []byte("a")}, {Ts: 1}, {Ts: 5, Value: []byte{0}}}, []int{0, 0, 1})
	addSeeds(f, e.b)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(d *decoder) []store.Cell { return d.readRowResp([]byte("r"), cols) },
			func(e *encoder, cells []store.Cell) {
				idx, err := columnIndexes(cells, cols)
				if err != nil {
					t.Fatal(err)
				}
				e.readRowResp(cells, idx)
			})
	})
}

// sampleReads are the reads the ReadRows seeds and decoders use: rows of
// two tables, one without columns, one with several spans.
var sampleReads = []store.RowRead{
	{Table: "t", Row: []byte{0xff}, Columns: []store.Column{col("f", ""), col("g", "\x00")}, Spans: []store.Span{{MaxTs: 9, MinTs: 2, Limit: -1}}},
	{Table: "\x00u", Row: []byte{0}},
	{Table: "t", Row: []byte("r"), Columns: []store.Column{col("f", "q")},
		Spans: []store.Span{{MaxTs: ^uint64(0), MinTs: 50, Limit: 1}, {MaxTs: 40, Limit: 2}}},
}

func FuzzReadRowsReq(f *testing.F) {
	var e encoder
	e.header(time.Second)
	e.readRowsReq(sampleReads)
	addSeeds(f, e.b)
	e = encoder{}
	e.header(0)
	e.readRowsReq(nil)
	addSeeds(f, e.b)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(d *decoder) []store.RowRead { d.header(); return d.readRowsReq() },
			func(e *encoder, reads []store.RowRead) { e.header(0); e.readRowsReq(reads) })
	})
}

func FuzzReadRowsResp(f *testing.F) {
	results := [][]store.Cell{
		{{Column: col("f", ""), Ts: 3, Value: []byte("a")}, {Column: col("g", "\x00"), Ts: 1}},
		nil,
		{{Column: col("f", "q"), Ts: 60, Value: []byte{0}}, {Column: col("f", "q"), Ts: 40}},
	}
	encode := func(t testing.TB, e *encoder, results [][]store.Cell) {
		idx := make([][]int, len(results))
		for i := range results {
			var err error
			if idx[i], err = columnIndexes(results[i], sampleReads[i].Columns); err != nil {
				t.Fatal(err)
			}
		}
		e.readRowsResp(results, idx)
	}
	var e encoder
	encode(f, &e, results)
	addSeeds(f, e.b)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(d *decoder) [][]store.Cell { return d.readRowsResp(sampleReads) },
			func(e *encoder, results [][]store.Cell) { encode(t, e, results) })
		// Whatever decodes has one result per read, each of the read's
		// row and columns.
		d := newDecoder(data)
		res := d.readRowsResp(sampleReads)
		if d.finish() != nil {
			return
		}
		if len(res) != len(sampleReads) {
			t.Fatalf("%d results for %d reads", len(res), len(sampleReads))
		}
		for i, cells := range res {
			for _, c := range cells {
				if !bytes.Equal(c.Row, sampleReads[i].Row) || !slices.Contains(sampleReads[i].Columns, c.Column) {
					t.Fatalf("result %d holds a cell of another read: %s", i, storetest.FormatCell(&c))
				}
			}
		}
	})
}

func FuzzScanReq(f *testing.F) {
	r := &scanReq{req: store.ScanRequest{Table: "t", Group: "notify", Start: []byte{}, End: []byte{0xff},
		Filter: store.ColumnFilter{Families: []string{"f"}, Columns: []store.Column{col("g", "\x00")}},
		Spans:  []store.Span{{MaxTs: 5, Limit: 2}}, After: &store.Position{Row: []byte{0}, Column: col("f", "q")}},
		mid: &midColumn{span: 0, taken: 2, lastTs: 4}, maxCells: 100}
	var e encoder
	e.header(time.Minute)
	e.scanReq(r)
	addSeeds(f, e.b)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(d *decoder) *scanReq { d.header(); return d.scanReq() },
			func(e *encoder, r *scanReq) { e.header(0); e.scanReq(r) })
	})
}

func FuzzScanPage(f *testing.F) {
	page := func(cells []store.Cell, more bool, mid *midColumn) []byte {
		var p pageEncoder
		for i := range cells {
			p.add(&cells[i])
		}
		var e encoder
		p.finish(&e, more, mid)
		return e.b
	}
	cells := []store.Cell{
		{Row: []byte{0}, Column: col("f", ""), Ts: 9, Value: []byte("a")},
		{Row: []byte{0}, Column: col("f", ""), Ts: 8, Value: []byte{}},
		{Row: []byte{0}, Column: col("g", "\xff"), Ts: 8},
		{Row: []byte{0xff}, Column: col("g", "\xff"), Ts: 1, Value: []byte{0}},
	}
	addSeeds(f, page(cells, true, &midColumn{span: 1, taken: 1, lastTs: 1}))
	addSeeds(f, page(nil, false, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, (*decoder).scanPage, func(e *encoder, p *scanPage) {
			var enc pageEncoder
			for i := range p.cells {
				enc.add(&p.cells[i])
			}
			enc.finish(e, p.more, p.mid)
		})
	})
}

func FuzzTablesResp(f *testing.F) {
	var e encoder
	e.tablesResp([]string{"a", "\x00", ""})
	addSeeds(f, e.b)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, (*decoder).tablesResp, (*encoder).tablesResp)
	})
}

// FuzzSmall covers the small messages: the tables and oracle requests,
// the oracle responses and the InvalidError carried by an error response.
func FuzzSmall(f *testing.F) {
	var e encoder
	e.header(time.Millisecond)
	e.str("notify")
	addSeeds(f, e.b)
	e = encoder{}
	e.u8(wireVersion)
	e.u64(1 << 59)
	e.u64(42)
	addSeeds(f, e.b)
	code, data := errorCode(&store.InvalidError{Op: "Scan", Field: "After.Row", Reason: "empty row"})
	addSeeds(f, data)
	f.Fuzz(func(t *testing.T, data []byte) {
		d := newDecoder(data)
		d.header()
		_ = d.str()
		_ = d.finish()
		d = newDecoder(data)
		d.header()
		_ = d.smallUint()
		_ = d.finish()
		d = newDecoder(data)
		d.version()
		_, _ = d.u64(), d.u64()
		_ = d.finish()
		msg := &nats.Msg{Data: data, Header: nats.Header{micro.ErrorCodeHeader: []string{code}, micro.ErrorHeader: []string{"x"}}}
		if err := responseError(storeService, "Scan", msg); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("invalid-request response decoded to %v", err)
		}
	})
}

// FuzzPartFrame covers the frames of the parts protocol: every kind, and
// whatever garbage decodes must round-trip.
func FuzzPartFrame(f *testing.F) {
	for _, fr := range []frame{
		{kind: frameOpen, timeout: time.Second, total: 10, sum: 0xdeadbeef, chunk: []byte{1, 2, 3}},
		{kind: frameOpen, total: 1, chunk: []byte{0}},
		{kind: frameAck, id: 1 << 40, seq: 3, maxChunk: 1 << 20, subject: "trickle.store.part.Xyz"},
		{kind: framePart, id: 5, seq: 1, chunk: []byte{0xff}},
		{kind: frameDownload, id: 2, total: 1 << 30, sum: 1, subject: "a.b", chunk: []byte("data")},
		{kind: framePull, id: 2, seq: 9, maxChunk: 1},
		{kind: frameChunk, id: 2, seq: 9, chunk: []byte{0}},
		{kind: frameAbort, id: 7},
	} {
		var e encoder
		e.frame(&fr)
		addSeeds(f, e.b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, func(d *decoder) frame { return d.frame() },
			func(e *encoder, fr frame) { e.frame(&fr) })
		d := newDecoder(data)
		fr := d.frame()
		if d.finish() != nil {
			return
		}
		// What decodes satisfies the checks receivers rely on.
		if fr.kind < frameOpen || fr.kind > frameKinds || (fr.kind != frameOpen && fr.id == 0) ||
			(fr.kind.hasChunk() && len(fr.chunk) == 0) || ((fr.kind == frameOpen || fr.kind == frameDownload) && uint64(len(fr.chunk)) > fr.total) {
			t.Fatalf("decoded an invalid frame %+v", fr)
		}
	})
}
