package enginetest

import (
	"context"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/protocol"
)

// The rules of what a transaction reads: its snapshot, merged with its
// own writes.
var readRules = []rule{
	{"a transaction reads its own writes through Get, GetRows and Scan", testReadYourWrites},
	{"a scan reads the transaction's writes as they were when the scan began", testScanOverOwnWrites},
	{"a scan of one row's columns reads the row's writes as they were when the scan began", testOneRowScanOverOwnWrites},
	{"a transaction reads its snapshot: what commits after it began is not seen", testSnapshotIsolation},
	{"GetRows leaves out the rows and cells that hold nothing", testGetRowsAbsent},
	{"GetRows refuses a column named twice or an empty row with ErrInvalidKey", testGetRowsRefuses},
	{"Scan selects rows by prefix, start and end, and columns by family and column", testScanFilters},
	{"a scan whose caller stops early yields nothing more", testScanStops},
	{"a scan after a cell skips the transaction's writes up to it too", testScanAfterOverOwnWrites},
	{"reads and writes of an empty or reserved name are refused with ErrInvalidKey", testInvalidKeys},
}

func testReadYourWrites(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r1", colA, "old r1a"}, cell{"r1", colB, "old r1b"}, cell{"r2", colA, "old r2a"})
	check := func(ctx context.Context, tx engine.Txn, when string) error {
		for _, c := range []cell{
			{"r1", colA, "new r1a"}, {"r1", colB, "-"}, {"r2", colA, "-"}, {"r3", colA, "new r3a"},
			{"r4", colA, "-"}, {"r4", colB, "r4b again"},
		} {
			v, err := get(ctx, tx, c.row, c.col)
			if err != nil {
				return err
			}
			if v != c.value {
				t.Errorf("%s: Get %s/%s = %q, want %q", when, c.row, c.col, v, c.value)
			}
		}
		got, err := tx.GetRows(ctx, table, rows("r1", "r2", "r3", "r4", "r5"), []engine.Column{colA, colB})
		if err != nil {
			return err
		}
		want := []string{"r1/f:a=new r1a", "r3/f:a=new r3a", "r4/f:b=r4b again"}
		wantList(t, when+": GetRows", rowsOf(got), want)
		scanned, err := scan(ctx, tx, engine.ScanOptions{Table: table})
		if err != nil {
			return err
		}
		wantList(t, when+": Scan", scanned, want)
		return nil
	}
	update(t, d.e, func(ctx context.Context, tx engine.Txn) error {
		// r4/a is set then deleted, r4/b deleted then set: the last write
		// of a cell is what the transaction reads.
		if err := put(tx, cell{"r1", colA, "new r1a"}, cell{"r1", colB, ""}, cell{"r2", colA, ""}, cell{"r3", colA, "new r3a"},
			cell{"r4", colA, "r4a"}, cell{"r4", colA, ""}, cell{"r4", colB, ""}, cell{"r4", colB, "r4b again"}); err != nil {
			return err
		}
		return check(ctx, tx, "in the writing transaction")
	})
	view(t, d.e, 0, func(ctx context.Context, tx engine.Txn) error { return check(ctx, tx, "after the commit") })
}

// testScanOverOwnWrites is the rule's example: rows c1..c6 committed, a
// scan during which the transaction deletes c2 and c4, overwrites c5 and
// c6 and adds c35 yields c1..c6 as they were when it began, and its
// writes from before the scan (c3 overwritten, c45 added); the next scan
// yields every write. A Get in between reads every write at once. Run at
// page sizes of 1 and 2, every write lands in a page the scan has not
// read yet.
func testScanOverOwnWrites(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	var committed []cell
	for _, r := range []string{"c1", "c2", "c3", "c4", "c5", "c6"} {
		committed = append(committed, cell{r, colA, "old " + r})
	}
	write(t, d.e, committed...)
	var during, after []string
	update(t, d.e, func(ctx context.Context, tx engine.Txn) error {
		during = nil
		if err := put(tx, cell{"c3", colA, "new c3"}, cell{"c45", colA, "new c45"}); err != nil {
			return err
		}
		for e, err := range tx.Scan(ctx, engine.ScanOptions{Table: table}) {
			if err != nil {
				return err
			}
			during = append(during, entries([]engine.Entry{e})...)
			switch string(e.Row) {
			case "c1":
				if err := put(tx, cell{"c2", colA, ""}, cell{"c4", colA, ""}, cell{"c5", colA, "new c5"}, cell{"c35", colA, "new c35"}); err != nil {
					return err
				}
				if v, err := get(ctx, tx, "c2", colA); err != nil || v != "-" {
					t.Errorf("Get of c2 deleted during the scan: %q, %v; want it absent", v, err)
				}
			case "c3":
				// Overwritten again, and c6 for the first time, once the
				// scan is past c3.
				if err := put(tx, cell{"c3", colA, "newer c3"}, cell{"c6", colA, "new c6"}); err != nil {
					return err
				}
			}
		}
		var err error
		after, err = scan(ctx, tx, engine.ScanOptions{Table: table})
		return err
	})
	wantList(t, "the scan during the writes", during, []string{
		"c1/f:a=old c1", "c2/f:a=old c2", "c3/f:a=new c3", "c4/f:a=old c4", "c45/f:a=new c45", "c5/f:a=old c5", "c6/f:a=old c6",
	})
	wantList(t, "the scan after them", after, []string{
		"c1/f:a=old c1", "c3/f:a=newer c3", "c35/f:a=new c35", "c45/f:a=new c45", "c5/f:a=new c5", "c6/f:a=new c6",
	})
}

// testOneRowScanOverOwnWrites: the same rule within one row, scanned for
// some of its columns (an engine may read only those columns' keys).
func testOneRowScanOverOwnWrites(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"w", colA, "old a"}, cell{"w", colB, "old b"}, cell{"w", colG, "old g"}, cell{"x", colA, "old xa"})
	one := engine.ScanOptions{Table: table, Start: []byte("w"), End: []byte("w\x00"), Families: []string{"f", "g"}}
	var during, after []string
	update(t, d.e, func(ctx context.Context, tx engine.Txn) error {
		during = nil
		for e, err := range tx.Scan(ctx, one) {
			if err != nil {
				return err
			}
			during = append(during, entries([]engine.Entry{e})...)
			if e.Column == colA {
				if err := put(tx, cell{"w", colB, "new b"}, cell{"w", colG, ""}); err != nil {
					return err
				}
			}
		}
		var err error
		after, err = scan(ctx, tx, one)
		return err
	})
	wantList(t, "the scan during the writes", during, []string{"w/f:a=old a", "w/f:b=old b", "w/g:c=old g"})
	wantList(t, "the scan after them", after, []string{"w/f:a=old a", "w/f:b=new b"})
}

func testSnapshotIsolation(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	other := d.process()
	write(t, d.e, cell{"r", colA, "v1"})
	for _, o := range []engine.TxnOptions{{}, {ReadOnly: true}} {
		write(t, d.e, cell{"r", colA, "v1"}, cell{"s", colA, ""}, cell{"q", colA, ""})
		err := d.e.Transact(bg, o, func(ctx context.Context, tx engine.Txn) error {
			if v, err := get(ctx, tx, "r", colA); err != nil || v != "v1" {
				t.Fatalf("r before the other commit: %q, %v", v, err)
			}
			write(t, other, cell{"r", colA, "v2"}, cell{"s", colA, "new"})
			for _, c := range []cell{{"r", colA, "v1"}, {"s", colA, "-"}} {
				if v, err := get(ctx, tx, c.row, c.col); err != nil || v != c.value {
					t.Errorf("read-only %v: %s after a later commit: %q, %v; want %q", o.ReadOnly, c.row, v, err, c.value)
				}
			}
			got, err := scan(ctx, tx, engine.ScanOptions{Table: table})
			wantList(t, "a scan after a later commit", got, []string{"r/f:a=v1"})
			if err != nil || o.ReadOnly {
				return err
			}
			// A write of another cell commits: no write-write conflict.
			return tx.Set(table, []byte("q"), colA, []byte("mine"))
		})
		if err != nil {
			t.Fatalf("read-only %v: %v", o.ReadOnly, err)
		}
		if want := map[bool]string{false: "mine", true: "-"}[o.ReadOnly]; read(t, d.e, "q", colA) != want {
			t.Errorf("read-only %v: q = %q after the transaction, want %q", o.ReadOnly, read(t, d.e, "q", colA), want)
		}
	}
}

func testGetRowsAbsent(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r1", colA, "1a"}, cell{"r2", colB, "2b"}, cell{"r3", colG, "3g"})
	view(t, d.e, 0, func(ctx context.Context, tx engine.Txn) error {
		got, err := tx.GetRows(ctx, table, rows("r1", "r2", "r3", "r4"), []engine.Column{colA, colB})
		if err != nil {
			return err
		}
		wantList(t, "GetRows", rowsOf(got), []string{"r1/f:a=1a", "r2/f:b=2b"})
		for _, r := range []string{"r3", "r4"} {
			if m, ok := got[r]; ok {
				t.Errorf("GetRows holds row %s, which has none of the columns: %v", r, m)
			}
		}
		for _, q := range []struct {
			rows [][]byte
			cols []engine.Column
		}{{nil, []engine.Column{colA}}, {rows("r1"), nil}} {
			got, err := tx.GetRows(ctx, table, q.rows, q.cols)
			if err != nil {
				return err
			}
			if len(got) != 0 {
				t.Errorf("GetRows of %d rows and %d columns = %v, want nothing", len(q.rows), len(q.cols), got)
			}
		}
		return nil
	})
}

func testGetRowsRefuses(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r1", colA, "1a"})
	view(t, d.e, 0, func(ctx context.Context, tx engine.Txn) error {
		_, err := tx.GetRows(ctx, table, rows("r1"), []engine.Column{colA, colB, colA})
		wantErr(t, "GetRows naming a column twice", err, engine.ErrInvalidKey)
		_, err = tx.GetRows(ctx, table, rows("r1", ""), []engine.Column{colA})
		wantErr(t, "GetRows of an empty row", err, engine.ErrInvalidKey)
		return nil
	})
}

func testScanFilters(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	var cells []cell
	for _, r := range []string{"a1", "a2", "b1", "b2", "\xff\xff"} {
		cells = append(cells, cell{r, colA, r + "a"}, cell{r, colB, r + "b"}, cell{r, colG, r + "g"})
	}
	write(t, d.e, cells...)
	// Tables whose names extend or precede t's hold cells no scan of t
	// yields.
	update(t, d.e, func(_ context.Context, tx engine.Txn) error {
		for _, tbl := range []string{"tt", "s", otherTable} {
			if err := tx.Set(tbl, []byte("a1"), colA, []byte(tbl)); err != nil {
				return err
			}
		}
		return nil
	})
	all := func(rs ...string) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r+"/f:a="+r+"a", r+"/f:b="+r+"b", r+"/g:c="+r+"g")
		}
		return out
	}
	for _, c := range []struct {
		name string
		o    engine.ScanOptions
		want []string
	}{
		{"everything", engine.ScanOptions{}, all("a1", "a2", "b1", "b2", "\xff\xff")},
		{"prefix", engine.ScanOptions{Prefix: []byte("a")}, all("a1", "a2")},
		{"prefix of 0xff bytes", engine.ScanOptions{Prefix: []byte("\xff")}, all("\xff\xff")},
		{"prefix over start and end", engine.ScanOptions{Prefix: []byte("b"), Start: []byte("a1"), End: []byte("a2")}, all("b1", "b2")},
		{"start and end", engine.ScanOptions{Start: []byte("a2"), End: []byte("b2")}, all("a2", "b1")},
		{"start only", engine.ScanOptions{Start: []byte("b1")}, all("b1", "b2", "\xff\xff")},
		{"end only", engine.ScanOptions{End: []byte("a2")}, all("a1")},
		{"start between rows", engine.ScanOptions{Start: []byte("a10"), End: []byte("b")}, all("a2")},
		{"start at end", engine.ScanOptions{Start: []byte("b1"), End: []byte("b1")}, nil},
		{"start past end", engine.ScanOptions{Start: []byte("b2"), End: []byte("a1")}, nil},
		{"a family", engine.ScanOptions{Families: []string{"g"}, End: []byte("b")}, []string{"a1/g:c=a1g", "a2/g:c=a2g"}},
		{"a column", engine.ScanOptions{Columns: []engine.Column{colB}, End: []byte("b")}, []string{"a1/f:b=a1b", "a2/f:b=a2b"}},
		{"a family and a column", engine.ScanOptions{Families: []string{"g"}, Columns: []engine.Column{colA}, Prefix: []byte("b")},
			[]string{"b1/f:a=b1a", "b1/g:c=b1g", "b2/f:a=b2a", "b2/g:c=b2g"}},
		{"one row's column", engine.ScanOptions{Start: []byte("b1"), End: []byte("b1\x00"), Columns: []engine.Column{colB}}, []string{"b1/f:b=b1b"}},
		{"one row's family", engine.ScanOptions{Start: []byte("b1"), End: []byte("b1\x00"), Families: []string{"f"}}, []string{"b1/f:a=b1a", "b1/f:b=b1b"}},
		{"a column no cell has", engine.ScanOptions{Columns: []engine.Column{{Family: "f", Qualifier: "z"}}}, nil},
		{"after a cell", engine.ScanOptions{After: &engine.Position{Row: []byte("a2"), Column: colA}, End: []byte("b2")},
			append([]string{"a2/f:b=a2b", "a2/g:c=a2g"}, all("b1")...)},
		{"after a row's last cell", engine.ScanOptions{Start: []byte("a2"), End: []byte("a2\x00"), Families: []string{"f"}, After: &engine.Position{Row: []byte("a2"), Column: colB}}, nil},
		{"after a cell of one row's family", engine.ScanOptions{Start: []byte("b1"), End: []byte("b1\x00"), Families: []string{"f"}, After: &engine.Position{Row: []byte("b1"), Column: colA}},
			[]string{"b1/f:b=b1b"}},
		{"after a cell no row has", engine.ScanOptions{Prefix: []byte("a"), After: &engine.Position{Row: []byte("a1"), Column: engine.Column{Family: "f", Qualifier: "aa"}}},
			append([]string{"a1/f:b=a1b", "a1/g:c=a1g"}, all("a2")...)},
		{"after a cell before the start", engine.ScanOptions{Start: []byte("b1"), End: []byte("b2"), After: &engine.Position{Row: []byte("a1"), Column: colB}}, all("b1")},
	} {
		c.o.Table = table
		// Read-only, and read-write with nothing buffered: both read the
		// same cells.
		for _, o := range []engine.TxnOptions{{ReadOnly: true}, {}} {
			err := d.e.Transact(bg, o, func(ctx context.Context, tx engine.Txn) error {
				got, err := scan(ctx, tx, c.o)
				wantList(t, c.name, got, c.want)
				return err
			})
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		}
	}
}

func testScanStops(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r1", colA, "1"}, cell{"r2", colA, "2"}, cell{"r3", colA, "3"})
	for _, o := range []engine.TxnOptions{{ReadOnly: true}, {}} {
		err := d.e.Transact(bg, o, func(ctx context.Context, tx engine.Txn) error {
			if !o.ReadOnly {
				if err := tx.Set(table, []byte("r0"), colA, []byte("0")); err != nil {
					return err
				}
			}
			var got []string
			for e, err := range tx.Scan(ctx, engine.ScanOptions{Table: table}) {
				if err != nil {
					return err
				}
				got = append(got, string(e.Row))
				if len(got) == 2 {
					break // yield returns false: the iterator must not call it again
				}
			}
			if len(got) != 2 {
				t.Errorf("read-only %v: a scan stopped after 2 entries yielded %v", o.ReadOnly, got)
			}
			return nil
		})
		if err != nil {
			t.Errorf("read-only %v: %v", o.ReadOnly, err)
		}
	}
}

func testInvalidKeys(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	reserved := protocol.ReservedPrefix + "x"
	bad := []struct {
		name  string
		table string
		row   string
		col   engine.Column
	}{
		{"an empty table", "", "r", colA},
		{"a reserved table", reserved, "r", colA},
		{"an empty row", table, "", colA},
		{"an empty family", table, "r", engine.Column{Qualifier: "a"}},
		{"a reserved family", table, "r", engine.Column{Family: reserved, Qualifier: "a"}},
		{"the notifications' family", table, "r", engine.Column{Family: protocol.NotifyFamily, Qualifier: "a"}},
	}
	for _, b := range bad {
		var writes []error
		err := d.e.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
			_, err := tx.Get(ctx, b.table, []byte(b.row), b.col)
			wantErr(t, "Get of "+b.name, err, engine.ErrInvalidKey)
			if b.row != "" {
				_, err = tx.GetRows(ctx, b.table, rows(b.row), []engine.Column{b.col})
				wantErr(t, "GetRows of "+b.name, err, engine.ErrInvalidKey)
			}
			writes = []error{tx.Set(b.table, []byte(b.row), b.col, []byte("v")), tx.Delete(b.table, []byte(b.row), b.col)}
			return nil
		})
		if err != nil {
			t.Errorf("%s: the transaction: %v", b.name, err)
		}
		for _, err := range writes {
			wantErr(t, "a write of "+b.name, err, engine.ErrInvalidKey)
		}
	}
	view(t, d.e, 0, func(ctx context.Context, tx engine.Txn) error {
		for _, o := range []engine.ScanOptions{
			{Table: ""}, {Table: reserved}, {Table: table, Families: []string{reserved}},
			{Table: table, Columns: []engine.Column{{Family: protocol.NotifyFamily, Qualifier: "a"}}},
		} {
			_, err := scan(ctx, tx, o)
			wantErr(t, "a scan of "+o.Table+" "+showScan(o), err, engine.ErrInvalidKey)
		}
		return nil
	})
	err := d.e.NotifyWeak(bg, table, nil, weakCol)
	wantErr(t, "NotifyWeak of an empty row", err, engine.ErrInvalidKey)
}

func showScan(o engine.ScanOptions) string {
	if len(o.Families) > 0 {
		return "families " + o.Families[0]
	}
	if len(o.Columns) > 0 {
		return "column " + o.Columns[0].String()
	}
	return "rows"
}

func testScanAfterOverOwnWrites(t *testing.T, h Harness) {
	d := deploy(t, h, engine.Config{})
	write(t, d.e, cell{"r1", colA, "r1a"}, cell{"r1", colB, "r1b"})
	update(t, d.e, func(ctx context.Context, tx engine.Txn) error {
		if err := put(tx, cell{"r0", colA, "r0a"}, cell{"r1", colA, "new r1a"}, cell{"r1", colG, "r1g"}, cell{"r2", colA, "r2a"}); err != nil {
			return err
		}
		got, err := scan(ctx, tx, engine.ScanOptions{Table: table, After: &engine.Position{Row: []byte("r1"), Column: colA}})
		wantList(t, "scan after r1/f:a", got, []string{"r1/f:b=r1b", "r1/g:c=r1g", "r2/f:a=r2a"})
		return err
	})
}
