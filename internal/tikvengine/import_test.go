package tikvengine_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvengine"
	"github.com/trickle-dev/trickle/store"
)

// importCells are cells of tables t and u: rows of several columns, short
// and long values, an empty one, and strongly observed columns, which an
// import leaves no notification for. Keys are "table|row|qualifier".
func importCells(n int, tag string) map[string]string {
	m := map[string]string{}
	for i := range n {
		v := fmt.Sprintf("%s%d", tag, i)
		switch i % 4 {
		case 1:
			v = strings.Repeat("long", 50) + v
		case 2:
			v = ""
		}
		table := []string{"t", "u"}[i%2]
		m[fmt.Sprintf("%s|r%04d|q%d", table, i%97, i)] = v
	}
	return m
}

// strongFamily observes every column of family s strongly.
type strongFamily struct{}

func (strongFamily) ObservedKind(_ string, col store.Column) (engine.Kind, bool) {
	return engine.Strong, col.Family == strong.Family
}

func cellOf(k string) (table string, row []byte, col store.Column) {
	p := strings.Split(k, "|")
	fam := "f"
	if strings.HasSuffix(p[2], "7") {
		fam = strong.Family
	}
	return p[0], []byte(p[1]), store.Column{Family: fam, Qualifier: p[2]}
}

// setCells sets cells in key order, stopping with stop's error once stop
// says so.
func setCells(im engine.Importer, cells map[string]string, stop func(i int) error) error {
	for i, k := range slices.Sorted(maps.Keys(cells)) {
		if stop != nil {
			if err := stop(i); err != nil {
				return err
			}
		}
		t, r, c := cellOf(k)
		if err := im.Set(t, r, c, []byte(cells[k])); err != nil {
			return err
		}
	}
	return nil
}

// dump reads tables t and u at a fresh snapshot (at if not 0).
func dump(t testing.TB, db *tikvengine.DB, at uint64) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := db.Transact(bg, engine.TxnOptions{ReadOnly: true, At: at}, func(ctx context.Context, tx engine.Txn) error {
		for _, table := range []string{"t", "u"} {
			for e, err := range tx.Scan(ctx, engine.ScanOptions{Table: table}) {
				if err != nil {
					return err
				}
				got[fmt.Sprintf("%s|%s|%s", table, e.Row, e.Column.Qualifier)] = string(e.Value)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

var tu = []string{"t", "u"}

// An import reads back as committed data, with no notification, visible
// to snapshots from CommitTs on and to none before.
func TestImportReadsBackAsCommitted(t *testing.T) {
	db, _ := open(t, &tikvengine.Options{Observed: strongFamily{}})
	cells := importCells(500, "v")
	var s, c uint64
	before := db.ImportBatches()
	err := db.Import(bg, engine.ImportOptions{Tables: tu, ChunkBytes: 32 << 20}, func(ctx context.Context, im engine.Importer) error {
		s, c = im.StartTs(), im.CommitTs()
		return setCells(im, cells, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if s == 0 || c <= s {
		t.Fatalf("timestamps %d, %d: want 0 < StartTs < CommitTs", s, c)
	}
	if n := db.ImportBatches() - before; n != 1 {
		t.Errorf("%d batches for %d cells, want 1", n, len(cells))
	}
	if got := dump(t, db, 0); !maps.Equal(got, cells) {
		t.Fatalf("read back %d cells, want %d (or not the same)", len(got), len(cells))
	}
	if got := dump(t, db, c-1); len(got) != 0 {
		t.Fatalf("a snapshot below CommitTs reads %d imported cells", len(got))
	}
	if n := find(t, db); len(n) != 0 {
		t.Fatalf("the import left notifications: %v", n)
	}
	// Transactions read and write imported cells as any other.
	set(t, db, "r0000", store.Column{Family: "f", Qualifier: "q0"}, "after")
	if v, _ := get(t, db, 0, "r0000", store.Column{Family: "f", Qualifier: "q0"}); v != "after" {
		t.Fatalf("overwritten imported cell reads %q", v)
	}
}

// An import into a table that holds a cell is refused before anything
// is written, naming the cell.
func TestImportRefusesANonEmptyTable(t *testing.T) {
	db, _ := open(t, nil)
	set(t, db, "there", colA, "x")
	err := db.Import(bg, engine.ImportOptions{Tables: []string{"u", "t"}, ChunkBytes: 1 << 10}, func(ctx context.Context, im engine.Importer) error {
		return setCells(im, importCells(200, "v"), nil)
	})
	if !errors.Is(err, engine.ErrImportNotEmpty) || !strings.Contains(err.Error(), `t/"there" f:a`) {
		t.Fatalf("import into a non-empty table: %v", err)
	}
	if got := dump(t, db, 0); len(got) != 1 {
		t.Fatalf("the refused import wrote: %v", got)
	}
}

var errInjected = errors.New("injected failure")

// importPart runs an import of cells that fails once half of them are
// set, with batches of chunk bytes, and returns its timestamps.
func importPart(t *testing.T, db *tikvengine.DB, cells map[string]string, chunk int) (s, c uint64) {
	t.Helper()
	err := db.Import(bg, engine.ImportOptions{Tables: tu, ChunkBytes: chunk}, func(ctx context.Context, im engine.Importer) error {
		s, c = im.StartTs(), im.CommitTs()
		return setCells(im, cells, func(i int) error {
			if i == len(cells)/2 {
				return errInjected
			}
			return nil
		})
	})
	if !errors.Is(err, errInjected) {
		t.Fatalf("failing import: %v", err)
	}
	return s, c
}

// A resume at the failed import's timestamps leaves the tables holding
// exactly what it imports, whatever the failed attempt wrote.
func TestImportResumesAfterAFailure(t *testing.T) {
	db, _ := open(t, nil)
	first := importCells(600, "first")
	first["t|gone|q"] = "only in the first attempt"
	s, c := importPart(t, db, first, 2<<10)
	if n := len(dump(t, db, 0)); n == 0 || n >= len(first) {
		t.Fatalf("the failed import left %d of %d cells: not a partial import", n, len(first))
	}
	second := importCells(500, "second")
	err := db.Import(bg, engine.ImportOptions{Tables: tu, StartTs: s, CommitTs: c, ChunkBytes: 2 << 10}, func(ctx context.Context, im engine.Importer) error {
		if im.StartTs() != s || im.CommitTs() != c {
			t.Errorf("resumed at %d, %d, want %d, %d", im.StartTs(), im.CommitTs(), s, c)
		}
		return setCells(im, second, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := dump(t, db, 0); !maps.Equal(got, second) {
		t.Fatalf("after the resume: %d cells, want the %d imported (or not the same)", len(got), len(second))
	}
}

// An import that failed before its first write left no record: resuming
// it is a new import into the same tables, refused if they hold anything.
func TestImportResumeOfAnImportThatWroteNothing(t *testing.T) {
	db, _ := open(t, nil)
	s, c := importPart(t, db, importCells(100, "v"), 1<<20)
	set(t, db, "meanwhile", colA, "x")
	resume := engine.ImportOptions{Tables: tu, StartTs: s, CommitTs: c, ChunkBytes: 1 << 20}
	err := db.Import(bg, resume, func(ctx context.Context, im engine.Importer) error {
		return setCells(im, importCells(100, "v"), nil)
	})
	if !errors.Is(err, engine.ErrImportNotEmpty) {
		t.Fatalf("resume of an import that wrote nothing, into a written table: %v", err)
	}
	if got := dump(t, db, 0); len(got) != 1 {
		t.Fatalf("the refused resume changed the tables: %v", got)
	}
}

// Discard removes what a failed import wrote and writes nothing; a second
// one, or one of an import that wrote nothing, changes nothing.
func TestImportDiscard(t *testing.T) {
	db, _ := open(t, nil)
	s, c := importPart(t, db, importCells(600, "v"), 2<<10)
	discard := engine.ImportOptions{Tables: tu, StartTs: s, CommitTs: c, ChunkBytes: 1 << 20, Discard: true}
	if err := db.Import(bg, discard, nil); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, db, 0); len(got) != 0 {
		t.Fatalf("after Discard: %d cells", len(got))
	}
	set(t, db, "later", colA, "x")
	if err := db.Import(bg, discard, nil); err != nil {
		t.Fatal(err)
	}
	s2, c2 := importPart(t, db, importCells(100, "v"), 1<<20) // refused: nothing written
	if err := db.Import(bg, engine.ImportOptions{Tables: tu, StartTs: s2, CommitTs: c2, ChunkBytes: 1 << 20, Discard: true}, nil); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, db, 0); len(got) != 1 || got["t|later|a"] != "x" {
		t.Fatalf("Discard of imports that wrote nothing more changed the tables: %v", got)
	}
	err := db.Import(bg, engine.ImportOptions{Tables: tu, ChunkBytes: 1 << 20, Discard: true}, nil)
	if !errors.Is(err, engine.ErrInvalidOptions) {
		t.Fatalf("Discard without timestamps: %v", err)
	}
}

// A cell over TiKV's entry limit is refused by Set, naming it, before
// anything is written.
func TestImportRefusesABigCell(t *testing.T) {
	db, _ := open(t, nil)
	err := db.Import(bg, engine.ImportOptions{Tables: tu, ChunkBytes: 1 << 20}, func(ctx context.Context, im engine.Importer) error {
		if err := im.Set("t", []byte("small"), colA, []byte("v")); err != nil {
			return err
		}
		return im.Set("t", []byte("big"), colB, make([]byte, 7<<20))
	})
	if !errors.Is(err, tikvengine.ErrTooLarge) || !strings.Contains(err.Error(), `t/"big" f:b`) {
		t.Fatalf("import of a 7 MiB cell: %v", err)
	}
	if got := dump(t, db, 0); len(got) != 0 {
		t.Fatalf("the refused import wrote: %v", got)
	}
}

// Batches hold about ChunkBytes, ending between rows, and never more than
// 8 MiB whatever ChunkBytes says.
func TestImportSplitsBatches(t *testing.T) {
	db, _ := open(t, nil)
	cells := importCells(2000, "v") // about 140 KB
	before := db.ImportBatches()
	if err := db.Import(bg, engine.ImportOptions{Tables: tu, ChunkBytes: 8 << 10}, func(ctx context.Context, im engine.Importer) error {
		return setCells(im, cells, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if n := db.ImportBatches() - before; n < 10 || n > 40 {
		t.Errorf("%d batches of 8 KiB for about 140 KB", n)
	}
	if got := dump(t, db, 0); !maps.Equal(got, cells) {
		t.Fatalf("read back %d cells, want %d (or not the same)", len(got), len(cells))
	}
	// 20 MiB with the default ChunkBytes (32 MiB): three batches of 8 MiB.
	db2, _ := open(t, nil)
	value := make([]byte, 1<<20)
	before = db2.ImportBatches()
	if err := db2.Import(bg, engine.ImportOptions{Tables: tu, ChunkBytes: 32 << 20}, func(ctx context.Context, im engine.Importer) error {
		for i := range 20 {
			if err := im.Set("t", fmt.Appendf(nil, "r%02d", i), colA, value); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := db2.ImportBatches() - before; n != 3 {
		t.Errorf("%d batches for 20 MiB, want 3 of at most 8 MiB", n)
	}
}

// A cell that a transaction commits after the import's check is kept:
// the import does not write over it, as on the engine over a store,
// where the imported version is the older one.
func TestImportKeepsACellWrittenDuringTheImport(t *testing.T) {
	db, _ := open(t, nil)
	cells := importCells(400, "v")
	late := "u|r0095|q95"
	if _, ok := cells[late]; !ok {
		t.Fatalf("%s is not an imported cell", late)
	}
	lt, lr, lc := cellOf(late)
	wrote := false
	err := db.Import(bg, engine.ImportOptions{Tables: tu, ChunkBytes: 2 << 10}, func(ctx context.Context, im engine.Importer) error {
		return setCells(im, cells, func(i int) error {
			if i < len(cells)/2 || wrote {
				return nil
			}
			wrote = true // the first batch is written: the check is done
			return db.Transact(ctx, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
				return tx.Set(lt, lr, lc, []byte("written meanwhile"))
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	want := maps.Clone(cells)
	want[late] = "written meanwhile"
	if got := dump(t, db, 0); !maps.Equal(got, want) {
		t.Fatalf("%s = %q, %d cells, want the transaction's value and %d cells", late, got[late], len(got), len(want))
	}
}

// Set refuses what no import writes: a cell set twice in a batch, a table
// not named, a reserved family.
func TestImportRefusesBadCells(t *testing.T) {
	db, _ := open(t, nil)
	for name, fn := range map[string]func(im engine.Importer) error{
		"adjacent twice": func(im engine.Importer) error {
			im.Set("t", []byte("r"), colA, []byte("1"))
			return im.Set("t", []byte("r"), colA, []byte("2"))
		},
		"twice in a batch": func(im engine.Importer) error {
			im.Set("t", []byte("r"), colA, []byte("1"))
			im.Set("t", []byte("r"), colB, []byte("1"))
			return im.Set("t", []byte("r"), colA, []byte("2"))
		},
		"other table": func(im engine.Importer) error { return im.Set("v", []byte("r"), colA, nil) },
		"empty row":   func(im engine.Importer) error { return im.Set("t", nil, colA, nil) },
	} {
		err := db.Import(bg, engine.ImportOptions{Tables: tu, ChunkBytes: 1 << 20}, func(ctx context.Context, im engine.Importer) error { return fn(im) })
		if !errors.Is(err, engine.ErrInvalidKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := dump(t, db, 0); len(got) != 0 {
		t.Fatalf("refused imports wrote: %v", got)
	}
}

// An import whose context ends stops with the context's error.
func TestImportEndsWithItsContext(t *testing.T) {
	db, _ := open(t, nil)
	ctx, cancel := context.WithCancel(bg)
	err := db.Import(ctx, engine.ImportOptions{Tables: tu, ChunkBytes: 1 << 10}, func(ctx context.Context, im engine.Importer) error {
		return setCells(im, importCells(400, "v"), func(i int) error {
			if i == 100 {
				cancel()
			}
			return nil
		})
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("import with a cancelled context: %v", err)
	}
}
