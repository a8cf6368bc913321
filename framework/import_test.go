package framework_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

// importCells are what the import tests write: short values (inline in the
// write record), long ones (in a data record), an empty one, rows of two
// tables.
func importCells(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		v := fmt.Sprintf("v%d", i)
		switch i % 3 {
		case 1:
			v = strings.Repeat("long", 100) + v
		case 2:
			v = ""
		}
		m[fmt.Sprintf("t%d|r%03d|q%d", i%2, i%17, i)] = v
	}
	return m
}

func splitCell(k string) (table string, row []byte, col framework.Column) {
	p := strings.Split(k, "|")
	return p[0], []byte(p[1]), framework.Column{Family: "c", Qualifier: p[2]}
}

func setAll(im *framework.Importer, cells map[string]string) error {
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range cells {
			if !yield(k) {
				return
			}
		}
	}) {
		t, r, c := splitCell(k)
		if err := im.Set(t, r, c, []byte(cells[k])); err != nil {
			return err
		}
	}
	return nil
}

// rawDump lists every stored version of tables t0 and t1 in both groups,
// with start and commit timestamps replaced by S and C so that two
// writers of the same cells compare equal.
func rawDump(t *testing.T, st store.Store, start, commit uint64) []string {
	t.Helper()
	var out []string
	for _, table := range []string{"t0", "t1"} {
		for _, g := range []string{store.DefaultGroup, protocol.NotifyGroup} {
			for c, err := range st.Scan(context.Background(), store.ScanRequest{Table: table, Group: g}) {
				if err != nil {
					t.Fatal(err)
				}
				kind, ts := protocol.Untag(c.Ts)
				v := string(c.Value)
				switch kind {
				case protocol.KindWrite:
					w, err := protocol.DecodeWrite(c.Value)
					if err != nil {
						t.Fatal(err)
					}
					if w.StartTs != start {
						t.Fatalf("write record of %s %q %s names start %d, want %d", table, c.Row, c.Column, w.StartTs, start)
					}
					v = fmt.Sprintf("op=%v inline=%v %q", w.Op, w.Inline, w.Value)
				}
				name := map[uint64]string{start: "S", commit: "C"}[ts]
				if name == "" {
					name = fmt.Sprint(ts)
				}
				out = append(out, fmt.Sprintf("%s %q %s %v@%s %s", table, c.Row, c.Column, kind, name, v))
			}
		}
	}
	return out
}

func openImportDB(t *testing.T, st store.Store, reg *framework.Registry) *framework.DB {
	t.Helper()
	if reg == nil {
		reg = framework.NewRegistry()
	}
	db, err := framework.Open(context.Background(), st, memOracle(t), &framework.Options{Observers: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// An import leaves, byte for byte, what a transaction writing the same
// cells leaves (timestamps aside), whether it ingests sstables or writes
// through ApplyAll; transactions read it back; it notifies no observer.
func TestImportLooksLikeACommit(t *testing.T) {
	ctx := context.Background()
	cells := importCells(400)
	reg := framework.NewRegistry()
	// Observed column: a transaction writing it leaves a notification, an
	// import must not.
	obs := framework.Column{Family: "c", Qualifier: "q0"}
	if err := reg.Register(framework.Observer{Name: "o", Table: "t0", Columns: []framework.Column{obs}, Kind: framework.Strong, Fn: noop}); err != nil {
		t.Fatal(err)
	}

	// Reference: one transaction.
	ref := memStore(t, vfs.NewMem())
	defer ref.Close()
	db := openImportDB(t, ref, framework.NewRegistry())
	var start uint64
	if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		start = tx.StartTs()
		for k, v := range cells {
			tb, r, c := splitCell(k)
			if err := tx.Set(tb, r, c, []byte(v)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var commit uint64
	for c, err := range ref.Scan(ctx, store.ScanRequest{Table: "t0"}) {
		if err != nil {
			t.Fatal(err)
		}
		if k, ts := protocol.Untag(c.Ts); k == protocol.KindWrite {
			commit = ts
			break
		}
	}
	want := rawDump(t, ref, start, commit)

	for _, ingest := range []string{"yes", "no", "refused"} {
		t.Run("ingest="+ingest, func(t *testing.T) {
			ps := memStore(t, vfs.NewMem())
			defer ps.Close()
			var st store.Store = ps
			refusing := &refusingIngest{DB: ps}
			switch ingest {
			case "no":
				st = struct{ store.Store }{ps} // hides Ingest
			case "refused":
				st = refusing
			}
			db := openImportDB(t, st, reg)
			var s, c uint64
			err := db.Import(ctx, &framework.ImportOptions{Tables: []string{"t0", "t1"}, ChunkBytes: 1 << 12}, func(ctx context.Context, im *framework.Importer) error {
				s, c = im.StartTs(), im.CommitTs()
				return setAll(im, cells)
			})
			if err != nil {
				t.Fatal(err)
			}
			if s == 0 || c <= s {
				t.Fatalf("timestamps %d, %d", s, c)
			}
			if got := rawDump(t, st, s, c); !slices.Equal(got, want) {
				t.Fatalf("import stored\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			// A refused Ingest is not asked again for the later chunks.
			if n := refusing.calls.Load(); ingest == "refused" && n != 1 {
				t.Errorf("Ingest called %d times, want once: the import should write with ApplyAll after a refusal", n)
			}
			if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
				for k, v := range cells {
					tb, r, col := splitCell(k)
					got, err := tx.Get(ctx, tb, r, col)
					if err != nil || string(got) != v {
						return fmt.Errorf("%s = %q, %v; want %q", k, got, err, v)
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			// The next transaction writes over imported cells as over any.
			if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
				return tx.Set("t0", []byte("r000"), obs, []byte("new"))
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A chunk of more cells than the importer keeps in one block (its cells
// are turned into row transactions block by block, on every core) is
// written whole: every cell reads back, none twice.
func TestImportOfAChunkOfManyBlocks(t *testing.T) {
	ctx := context.Background()
	cells := importCells(100_000) // over three blocks of 32,768
	st := memStore(t, vfs.NewMem())
	defer st.Close()
	db := openImportDB(t, st, framework.NewRegistry())
	if err := db.Import(ctx, &framework.ImportOptions{Tables: []string{"t0", "t1"}, ChunkBytes: 1 << 30}, func(ctx context.Context, im *framework.Importer) error {
		return setAll(im, cells)
	}); err != nil {
		t.Fatal(err)
	}
	seen := 0
	if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for _, table := range []string{"t0", "t1"} {
			for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: table}) {
				if err != nil {
					return err
				}
				k := table + "|" + string(e.Row) + "|" + e.Column.Qualifier
				if v, ok := cells[k]; !ok || v != string(e.Value) {
					return fmt.Errorf("%s = %q; want %q (imported: %v)", k, e.Value, v, ok)
				}
				seen++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if seen != len(cells) {
		t.Fatalf("%d cells read back, want %d", seen, len(cells))
	}

	// A cell set twice, in the first block and in the last, is found as
	// the store sorts the whole chunk: nothing of the chunk is written.
	st2 := memStore(t, vfs.NewMem())
	defer st2.Close()
	db2 := openImportDB(t, st2, framework.NewRegistry())
	err := db2.Import(ctx, &framework.ImportOptions{Tables: []string{"t0", "t1"}, ChunkBytes: 1 << 30}, func(ctx context.Context, im *framework.Importer) error {
		if err := im.Set("t0", []byte("twice"), framework.Column{Family: "c", Qualifier: "q"}, []byte("first")); err != nil {
			return err
		}
		if err := setAll(im, importCells(70_000)); err != nil {
			return err
		}
		return im.Set("t0", []byte("twice"), framework.Column{Family: "c", Qualifier: "q"}, []byte("again"))
	})
	if !errors.Is(err, framework.ErrInvalidKey) {
		t.Fatalf("a cell set in two blocks of a chunk: %v, want ErrInvalidKey", err)
	}
	for c, err := range st2.Scan(ctx, store.ScanRequest{Table: "t0"}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Fatalf("%s/%q %s stored by a refused chunk", "t0", c.Row, c.Column)
	}
}

// failingIngest is a pebble store whose Ingest fails from call number
// failAt on, as a process dying during an import would leave it.
type failingIngest struct {
	*store.DB
	calls, failAt atomic.Int32
}

var errInjected = errors.New("injected ingest failure")

func (f *failingIngest) Ingest(ctx context.Context, txns []*store.RowTxn) error {
	if f.calls.Add(1) >= f.failAt.Load() {
		return errInjected
	}
	return f.DB.Ingest(ctx, txns)
}

// refusingIngest is a pebble store whose Ingest refuses as a store
// service without one does (errors.ErrUnsupported), writing nothing.
type refusingIngest struct {
	*store.DB
	calls atomic.Int32
}

func (r *refusingIngest) Ingest(context.Context, []*store.RowTxn) error {
	r.calls.Add(1)
	return fmt.Errorf("the store cannot ingest: %w", errors.ErrUnsupported)
}

// rowsByCall is a pebble store that records the rows of each Ingest call.
type rowsByCall struct {
	*store.DB
	calls []map[string]bool
}

func (r *rowsByCall) Ingest(ctx context.Context, txns []*store.RowTxn) error {
	rows := map[string]bool{}
	for _, txn := range txns {
		rows[txn.Table+"|"+string(txn.Row)] = true
	}
	r.calls = append(r.calls, rows)
	return r.DB.Ingest(ctx, txns)
}

// An import's chunk ends between two rows, never inside one, however
// much one row holds: with cells set in key order, its chunks then cover
// disjoint key ranges.
func TestImportChunksEndBetweenRows(t *testing.T) {
	ctx := context.Background()
	st := &rowsByCall{DB: memStore(t, vfs.NewMem())}
	defer st.Close()
	db := openImportDB(t, st, framework.NewRegistry())
	cells := importCells(600) // 34 rows of about 6 KiB
	if err := db.Import(ctx, &framework.ImportOptions{Tables: []string{"t0", "t1"}, ChunkBytes: 1 << 10}, func(ctx context.Context, im *framework.Importer) error {
		return setAll(im, cells)
	}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for i, rows := range st.calls {
		for r := range rows {
			if j, ok := seen[r]; ok {
				t.Fatalf("row %s written by chunks %d and %d", r, j, i)
			}
			seen[r] = i
		}
	}
	// Every row is larger than a chunk: one chunk per row.
	if len(seen) != 34 || len(st.calls) != 34 {
		t.Fatalf("%d rows in %d chunks, want 34 in 34", len(seen), len(st.calls))
	}
}

// An import into a table that holds anything is refused before it writes;
// one that failed half way is resumed, or discarded, with its timestamps.
func TestImportRefusesAndResumes(t *testing.T) {
	ctx := context.Background()
	ps := memStore(t, vfs.NewMem())
	defer ps.Close()
	st := &failingIngest{DB: ps}
	st.failAt.Store(1 << 30)
	db := openImportDB(t, st, nil)
	tables := []string{"t0", "t1"}

	// Refused: t1 holds a cell.
	in := func(table string, ts uint64, del bool) {
		t.Helper()
		if _, err := ps.Apply(ctx, &store.RowTxn{Table: table, Row: []byte("x"), Mutations: []store.Mutation{{Column: colA, Ts: ts, Value: []byte("in the way"), Delete: del}}}); err != nil {
			t.Fatal(err)
		}
	}
	in("t1", 7, false)
	err := db.Import(ctx, &framework.ImportOptions{Tables: tables}, func(ctx context.Context, im *framework.Importer) error {
		return setAll(im, importCells(50))
	})
	if !errors.Is(err, framework.ErrImportNotEmpty) || !strings.Contains(err.Error(), `t1/"x" c:a`) {
		t.Fatalf("import into a non-empty table: %v", err)
	}
	if n := len(rawDump(t, st, 0, 0)); n != 1 {
		t.Fatalf("the refused import left %d versions; want only the one written before", n)
	}
	in("t1", 7, true)

	// Bad calls.
	for name, o := range map[string]*framework.ImportOptions{
		"no tables":        {},
		"one timestamp":    {Tables: tables, StartTs: 5},
		"future":           {Tables: tables, StartTs: protocol.MaxTs - 1, CommitTs: protocol.MaxTs},
		"reversed":         {Tables: tables, StartTs: 9, CommitTs: 3},
		"discard unknown":  {Tables: tables, Discard: true},
		"reserved table":   {Tables: []string{"__meta"}},
		"negative chunk":   {Tables: tables, ChunkBytes: -1},
		"discard reversed": {Tables: tables, StartTs: 9, CommitTs: 3, Discard: true},
	} {
		err := db.Import(ctx, o, func(context.Context, *framework.Importer) error { return nil })
		if !errors.Is(err, framework.ErrInvalidOptions) && !errors.Is(err, framework.ErrInvalidKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, fn := range map[string]func(im *framework.Importer) error{
		"other table": func(im *framework.Importer) error { return im.Set("t2", []byte("r"), colA, nil) },
		"twice": func(im *framework.Importer) error {
			im.Set("t0", []byte("r"), colA, nil)
			return im.Set("t0", []byte("r"), colA, []byte("again"))
		},
		"reserved family": func(im *framework.Importer) error {
			return im.Set("t0", []byte("r"), framework.Column{Family: "ntfy"}, nil)
		},
	} {
		err := db.Import(ctx, &framework.ImportOptions{Tables: tables}, func(_ context.Context, im *framework.Importer) error { return fn(im) })
		if !errors.Is(err, framework.ErrInvalidKey) {
			t.Errorf("%s: %v", name, err)
		}
	}

	// A crash after the first of several chunks.
	first := importCells(300)
	first["t0|gone|q"] = "only in the first attempt"
	var s, c uint64
	st.calls.Store(0)
	st.failAt.Store(2)
	err = db.Import(ctx, &framework.ImportOptions{Tables: tables, ChunkBytes: 1 << 12}, func(ctx context.Context, im *framework.Importer) error {
		s, c = im.StartTs(), im.CommitTs()
		return setAll(im, first)
	})
	if !errors.Is(err, errInjected) {
		t.Fatalf("import with a failing store: %v", err)
	}
	left := len(rawDump(t, st, s, c))
	if left == 0 {
		t.Fatal("the failed import wrote nothing: the test does not test a partial import")
	}
	// Anything else in the table refuses even a resume.
	in("t0", 7, false)
	st.failAt.Store(1 << 30)
	resume := &framework.ImportOptions{Tables: tables, StartTs: s, CommitTs: c, ChunkBytes: 1 << 12}
	if err := db.Import(ctx, resume, func(ctx context.Context, im *framework.Importer) error { return setAll(im, first) }); !errors.Is(err, framework.ErrImportNotEmpty) {
		t.Fatalf("resume into a table written meanwhile: %v", err)
	}
	in("t0", 7, true)
	// Resumed with other data: what only the first attempt wrote is gone.
	second := importCells(300)
	if err := db.Import(ctx, resume, func(ctx context.Context, im *framework.Importer) error {
		if im.StartTs() != s || im.CommitTs() != c {
			t.Errorf("resumed at %d, %d, want %d, %d", im.StartTs(), im.CommitTs(), s, c)
		}
		return setAll(im, second)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		n := 0
		for _, table := range tables {
			for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: table}) {
				if err != nil {
					return err
				}
				k := fmt.Sprintf("%s|%s|%s", table, e.Row, e.Column.Qualifier)
				if v, ok := second[k]; !ok || v != string(e.Value) {
					return fmt.Errorf("%s = %q after the resumed import", k, e.Value)
				}
				n++
			}
		}
		if n != len(second) {
			return fmt.Errorf("%d cells after the resumed import, want %d", n, len(second))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Discard removes it all.
	if err := db.Import(ctx, &framework.ImportOptions{Tables: tables, StartTs: s, CommitTs: c, Discard: true}, nil); err != nil {
		t.Fatal(err)
	}
	if got := rawDump(t, st, s, c); len(got) != 0 {
		t.Fatalf("after Discard: %v", got)
	}
}

// BenchmarkImport writes 200k cells into an on-disk store by sstable
// ingestion and, for stores that cannot ingest, through ApplyAll.
func BenchmarkImport(b *testing.B) {
	for _, ingest := range []bool{true, false} {
		b.Run(fmt.Sprintf("ingest=%v", ingest), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				ps, err := store.Open(b.TempDir(), framework.StoreOptions(&store.Options{Durability: store.DurabilityNone, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
				if err != nil {
					b.Fatal(err)
				}
				var st store.Store = ps
				if !ingest {
					st = struct{ store.Store }{ps}
				}
				ts, err := oracle.NewServer(oracle.NewMemPersister(0), &oracle.ServerOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				db, err := framework.Open(context.Background(), st, ts, &framework.Options{Observers: framework.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				err = db.Import(context.Background(), &framework.ImportOptions{Tables: []string{"t"}}, func(ctx context.Context, im *framework.Importer) error {
					for i := range 200_000 {
						if err := im.Set("t", fmt.Appendf(nil, "row%07d", (i*7919)%200_000), colA, fmt.Appendf(nil, "value of cell %d", i)); err != nil {
							return err
						}
					}
					return nil
				})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				ts.Close()
				ps.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*200_000), "ns/cell")
		})
	}
}
