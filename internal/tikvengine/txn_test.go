package tikvengine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/trickle-dev/trickle/internal/engine"
	"github.com/trickle-dev/trickle/internal/tikvengine"
	"github.com/trickle-dev/trickle/store"
)

func TestReadYourWrites(t *testing.T) {
	db, _ := open(t, nil)
	set(t, db, "r", colA, "old")
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		if err := tx.Set("t", []byte("r"), colA, []byte("new")); err != nil {
			return err
		}
		if v, err := tx.Get(ctx, "t", []byte("r"), colA); err != nil || string(v) != "new" {
			t.Errorf("Get after Set = %q, %v; want new", v, err)
		}
		if err := tx.Set("t", []byte("r"), colB, nil); err != nil {
			return err
		}
		if v, err := tx.Get(ctx, "t", []byte("r"), colB); err != nil || len(v) != 0 {
			t.Errorf("Get of an empty value = %q, %v", v, err)
		}
		if err := tx.Delete("t", []byte("r"), colA); err != nil {
			return err
		}
		if _, err := tx.Get(ctx, "t", []byte("r"), colA); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("Get after Delete: %v, want ErrNotFound", err)
		}
		return nil
	})
	if _, ok := get(t, db, 0, "r", colA); ok {
		t.Error("deleted cell still there after commit")
	}
	if v, ok := get(t, db, 0, "r", colB); !ok || v != "" {
		t.Errorf("empty value after commit = %q, %v", v, ok)
	}
}

func TestSnapshotIsolation(t *testing.T) {
	db, _ := open(t, nil)
	set(t, db, "r", colA, "v1")
	var before uint64 // a snapshot after v1 committed
	if err := db.Transact(bg, engine.TxnOptions{ReadOnly: true}, func(_ context.Context, tx engine.Txn) error {
		before = tx.StartTs()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		if v, err := tx.Get(ctx, "t", []byte("r"), colA); err != nil || string(v) != "v1" {
			t.Fatalf("first read = %q, %v", v, err)
		}
		set(t, db, "r", colA, "v2") // commits while tx runs
		if v, err := tx.Get(ctx, "t", []byte("r"), colA); err != nil || string(v) != "v1" {
			t.Errorf("read after a concurrent commit = %q, %v; want the snapshot's v1", v, err)
		}
		return tx.Set("t", []byte("other"), colA, []byte("x"))
	})
	if v, _ := get(t, db, 0, "r", colA); v != "v2" {
		t.Errorf("now = %q, want v2", v)
	}
	// The past: the snapshot just after the first write.
	if v, _ := get(t, db, before, "r", colA); v != "v1" {
		t.Errorf("at %d = %q, want v1", before, v)
	}
}

// TestWriteWriteConflict: two transactions that read and write one cell
// from snapshots taken before either commits: exactly one commits at its
// first attempt, the other conflicts and commits at its second, having
// read the first's write.
func TestWriteWriteConflict(t *testing.T) {
	db, _ := open(t, nil)
	set(t, db, "r", colA, "0")
	var read sync.WaitGroup
	read.Add(2)
	attempts := make([]int, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
				attempts[i]++
				v, err := tx.Get(ctx, "t", []byte("r"), colA)
				if err != nil {
					return err
				}
				if attempts[i] == 1 {
					read.Done()
					read.Wait() // both snapshots are taken
				}
				return tx.Set("t", []byte("r"), colA, append(v, byte('a'+i)))
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	slices.Sort(attempts)
	if !slices.Equal(attempts, []int{1, 2}) {
		t.Errorf("attempts = %v, want one transaction at 1 and the other at 2", attempts)
	}
	if v, _ := get(t, db, 0, "r", colA); v != "0ab" && v != "0ba" {
		t.Errorf("final value %q: one write lost", v)
	}
}

func TestConflictIsErrConflictWithoutRetries(t *testing.T) {
	db, c := open(t, nil)
	db1 := openOn(t, c, &tikvengine.Options{MaxAttempts: 1})
	err := db1.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		set(t, db, "r", colA, "theirs") // commits after tx's snapshot
		return tx.Set("t", []byte("r"), colA, []byte("mine"))
	})
	if !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("commit over a newer write: %v, want ErrConflict", err)
	}
}

// TestCounter: N goroutines increment one counter k times each; none is
// lost.
func TestCounter(t *testing.T) {
	db, _ := open(t, nil)
	const n, k = 6, 5
	var wg sync.WaitGroup
	var conflicts atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range k {
				first := true
				err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
					if !first {
						conflicts.Add(1)
					}
					first = false
					var c uint64
					v, err := tx.Get(ctx, "t", []byte("counter"), colA)
					switch {
					case err == nil:
						c = binary.BigEndian.Uint64(v)
					case !errors.Is(err, engine.ErrNotFound):
						return err
					}
					return tx.Set("t", []byte("counter"), colA, binary.BigEndian.AppendUint64(nil, c+1))
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	v, ok := get(t, db, 0, "counter", colA)
	if !ok || binary.BigEndian.Uint64([]byte(v)) != n*k {
		t.Fatalf("counter = %x (%v), want %d", v, ok, n*k)
	}
	t.Logf("%d increments, %d retried attempts", n*k, conflicts.Load())
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	db, _ := open(t, nil)
	err := db.Transact(bg, engine.TxnOptions{ReadOnly: true}, func(ctx context.Context, tx engine.Txn) error {
		for what, err := range map[string]error{
			"Set":        tx.Set("t", []byte("r"), colA, []byte("v")),
			"Delete":     tx.Delete("t", []byte("r"), colA),
			"NotifyWeak": tx.NotifyWeak("t", []byte("r"), weak),
		} {
			if !errors.Is(err, engine.ErrReadOnly) {
				t.Errorf("%s in a read-only transaction: %v, want ErrReadOnly", what, err)
			}
		}
		if _, err := db.Claim(ctx, tx, "obs", engine.Strong, nil); !errors.Is(err, engine.ErrReadOnly) {
			t.Errorf("Claim in a read-only transaction: %v, want ErrReadOnly", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestInvalidKeys(t *testing.T) {
	db, _ := open(t, nil)
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		for _, k := range []struct {
			table, row string
			col        store.Column
		}{
			{"", "r", colA}, {"t", "", colA}, {"t", "r", store.Column{Qualifier: "q"}},
			{"__meta", "r", colA}, {"t", "r", store.Column{Family: "ntfy"}}, {"t", "r", store.Column{Family: "__ack"}},
		} {
			if err := tx.Set(k.table, []byte(k.row), k.col, []byte("v")); !errors.Is(err, engine.ErrInvalidKey) {
				t.Errorf("Set(%q, %q, %s): %v, want ErrInvalidKey", k.table, k.row, k.col, err)
			}
			if _, err := tx.Get(ctx, k.table, []byte(k.row), k.col); !errors.Is(err, engine.ErrInvalidKey) {
				t.Errorf("Get(%q, %q, %s): %v, want ErrInvalidKey", k.table, k.row, k.col, err)
			}
		}
		for _, err := range tx.Scan(ctx, engine.ScanOptions{Table: "t", Families: []string{"ntfy"}}) {
			if !errors.Is(err, engine.ErrInvalidKey) {
				t.Errorf("Scan of a reserved family: %v, want ErrInvalidKey", err)
			}
		}
		return nil
	})
}

// TestScanMergesWrites: a scan sees the snapshot with the transaction's
// own sets and deletes, in row then column order, and only the rows and
// columns asked for.
func TestScanMergesWrites(t *testing.T) {
	db, _ := open(t, nil)
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		for _, r := range []string{"r1", "r2", "r3", "r4"} {
			if err := tx.Set("t", []byte(r), colA, []byte(r+"a")); err != nil {
				return err
			}
		}
		if err := tx.Set("u", []byte("r2"), colA, []byte("other table")); err != nil {
			return err
		}
		return tx.Set("t", []byte("r4"), store.Column{Family: "g", Qualifier: "z"}, []byte("r4gz"))
	})
	scan := func(tx engine.Txn, o engine.ScanOptions) []string {
		var out []string
		for e, err := range tx.Scan(bg, o) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s/%s=%s", e.Row, e.Column, e.Value))
		}
		return out
	}
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		for _, w := range []struct {
			row string
			col store.Column
			v   string
		}{{"r2", colB, "r2b"}, {"r0", colA, "r0a"}, {"r5", colA, "r5a"}, {"r1", colA, "r1a'"}} {
			if err := tx.Set("t", []byte(w.row), w.col, []byte(w.v)); err != nil {
				return err
			}
		}
		if err := tx.Delete("t", []byte("r3"), colA); err != nil {
			return err
		}
		got := scan(tx, engine.ScanOptions{Table: "t"})
		want := []string{"r0/f:a=r0a", "r1/f:a=r1a'", "r2/f:a=r2a", "r2/f:b=r2b", "r4/f:a=r4a", "r4/g:z=r4gz", "r5/f:a=r5a"}
		if !slices.Equal(got, want) {
			t.Errorf("Scan = %q\nwant %q", got, want)
		}
		got = scan(tx, engine.ScanOptions{Table: "t", Start: []byte("r1"), End: []byte("r4"), Columns: []store.Column{colB}})
		if want := []string{"r2/f:b=r2b"}; !slices.Equal(got, want) {
			t.Errorf("Scan of [r1, r4) column f:b = %q, want %q", got, want)
		}
		got = scan(tx, engine.ScanOptions{Table: "t", Prefix: []byte("r4"), Families: []string{"g"}})
		if want := []string{"r4/g:z=r4gz"}; !slices.Equal(got, want) {
			t.Errorf("Scan of prefix r4 family g = %q, want %q", got, want)
		}
		return nil
	})
}

func TestGetRows(t *testing.T) {
	db, _ := open(t, nil)
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		for i := range 5 {
			if err := tx.Set("t", fmt.Appendf(nil, "r%d", i), colA, fmt.Appendf(nil, "a%d", i)); err != nil {
				return err
			}
		}
		return tx.Set("t", []byte("r1"), colB, []byte("b1"))
	})
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		if err := tx.Delete("t", []byte("r2"), colA); err != nil {
			return err
		}
		if err := tx.Set("t", []byte("r3"), colB, []byte("b3")); err != nil {
			return err
		}
		got, err := tx.GetRows(ctx, "t", [][]byte{[]byte("r1"), []byte("r2"), []byte("r3"), []byte("r9")}, []store.Column{colA, colB})
		if err != nil {
			return err
		}
		want := map[string]map[store.Column]string{"r1": {colA: "a1", colB: "b1"}, "r3": {colA: "a3", colB: "b3"}}
		if len(got) != len(want) {
			t.Errorf("GetRows = %q, want %q", got, want)
		}
		for r, cols := range want {
			for c, v := range cols {
				if string(got[r][c]) != v || len(got[r]) != len(cols) {
					t.Errorf("GetRows[%s] = %q, want %q", r, got[r], cols)
				}
			}
		}
		return nil
	})
}

func TestSnapshotBounds(t *testing.T) {
	db, c := open(t, nil)
	ts := set(t, db, "r", colA, "v")
	// Let TiKV collect below a timestamp after the write. (First: the
	// engine caches the safe point it reads.)
	now := set(t, db, "r", colA, "w")
	if _, err := c.KV.GC(bg, now); err != nil {
		t.Skipf("the mock cluster cannot GC: %v", err)
	}
	if sp := db.SafePoint(); sp < now {
		t.Fatalf("SafePoint = %d after a GC to %d", sp, now)
	}
	err := db.Transact(bg, engine.TxnOptions{ReadOnly: true, At: ts}, func(context.Context, engine.Txn) error { return nil })
	if !errors.Is(err, engine.ErrSnapshotTooOld) {
		t.Errorf("a snapshot below the safe point: %v, want ErrSnapshotTooOld", err)
	}
	err = db.Transact(bg, engine.TxnOptions{ReadOnly: true, At: now << 4}, func(context.Context, engine.Txn) error { return nil })
	if !errors.Is(err, engine.ErrFutureSnapshot) {
		t.Errorf("a snapshot in the future: %v, want ErrFutureSnapshot", err)
	}
}

// A read-write transaction may write while it scans (an observer that
// rewrites the cells it reads): the scan reads pages of keys and closes
// its iterator before yielding, since client-go's write buffer refuses a
// write under an open iterator. Every stored cell is yielded once, across
// page boundaries, and the writes commit.
func TestScanWhileWriting(t *testing.T) {
	db, _ := open(t, &tikvengine.Options{ScanBatchSize: 3})
	const rows = 10
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		for i := range rows {
			if err := tx.Set("t", fmt.Appendf(nil, "r%02d", i), colA, []byte("v")); err != nil {
				return err
			}
		}
		return nil
	})
	var seen []string
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		seen = seen[:0]
		// A write buffered in the scanned range before the scan.
		if err := tx.Set("t", []byte("r05"), colB, []byte("copy of v")); err != nil {
			return err
		}
		for e, err := range tx.Scan(ctx, engine.ScanOptions{Table: "t", Columns: []store.Column{colA}}) {
			if err != nil {
				return err
			}
			seen = append(seen, string(e.Row))
			if err := tx.Set("t", e.Row, colB, append([]byte("copy of "), e.Value...)); err != nil {
				return err
			}
		}
		return nil
	})
	if len(seen) != rows {
		t.Fatalf("the scan yielded %d cells, want %d: %q", len(seen), rows, seen)
	}
	if err := db.Transact(bg, engine.TxnOptions{ReadOnly: true}, func(ctx context.Context, tx engine.Txn) error {
		n := 0
		for e, err := range tx.Scan(ctx, engine.ScanOptions{Table: "t", Columns: []store.Column{colB}}) {
			if err != nil {
				return err
			}
			if string(e.Value) != "copy of v" {
				t.Errorf("%s: %q", e.Row, e.Value)
			}
			n++
		}
		if n != rows {
			t.Errorf("%d copies committed, want %d", n, rows)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestScanOfOneRowsColumns: a scan of one row with a column filter reads
// only the wanted columns' keys, and yields exactly them, its own writes
// merged, for families and single columns alike.
func TestScanOfOneRowsColumns(t *testing.T) {
	db, _ := open(t, nil)
	cols := []store.Column{{Family: "a", Qualifier: "1"}, {Family: "b", Qualifier: "1"}, {Family: "b", Qualifier: "2"}, {Family: "ba", Qualifier: "1"}, {Family: "c", Qualifier: "1"}}
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		for _, r := range []string{"r", "r0", "s"} {
			for _, c := range cols {
				if err := tx.Set("t", []byte(r), c, []byte(r+"/"+c.String())); err != nil {
					return err
				}
			}
		}
		return nil
	})
	update(t, db, func(ctx context.Context, tx engine.Txn) error {
		if err := tx.Set("t", []byte("r"), store.Column{Family: "b", Qualifier: "0"}, []byte("buffered")); err != nil {
			return err
		}
		one := func(o engine.ScanOptions) []string {
			o.Table, o.Start, o.End = "t", []byte("r"), []byte("r\x00")
			var out []string
			for e, err := range tx.Scan(ctx, o) {
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, fmt.Sprintf("%s/%s=%s", e.Row, e.Column, e.Value))
			}
			return out
		}
		if got, want := one(engine.ScanOptions{Families: []string{"b"}}), []string{"r/b:0=buffered", "r/b:1=r/b:1", "r/b:2=r/b:2"}; !slices.Equal(got, want) {
			t.Errorf("family b of row r = %q, want %q", got, want)
		}
		if got, want := one(engine.ScanOptions{Families: []string{"c"}, Columns: []store.Column{{Family: "a", Qualifier: "1"}}}), []string{"r/a:1=r/a:1", "r/c:1=r/c:1"}; !slices.Equal(got, want) {
			t.Errorf("family c and column a:1 of row r = %q, want %q", got, want)
		}
		return nil
	})
}

// A cell over TiKV's entry limit is refused at Set with ErrTooLarge
// naming it; what the transaction wrote before commits nothing.
func TestACellTooLargeForTiKVIsRefused(t *testing.T) {
	db, _ := open(t, nil)
	err := db.Transact(bg, engine.TxnOptions{}, func(ctx context.Context, tx engine.Txn) error {
		if err := tx.Set("t", []byte("small"), colA, []byte("v")); err != nil {
			return err
		}
		return tx.Set("t", []byte("big"), colA, make([]byte, 7<<20))
	})
	if !errors.Is(err, tikvengine.ErrTooLarge) || !strings.Contains(err.Error(), `t/"big"/f:a`) {
		t.Fatalf("Set of 7 MiB: %v, want ErrTooLarge naming t/\"big\"/f:a", err)
	}
	if err := db.Transact(bg, engine.TxnOptions{ReadOnly: true}, func(ctx context.Context, tx engine.Txn) error {
		if _, err := tx.Get(ctx, "t", []byte("small"), colA); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("the refused transaction's other write: %v, want not found", err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestAScanReadsItsOwnWritesAsOfItsStart: a scan sees the transaction's
// writes as they were when it began, whatever its page size, as the
// protocol engine's does: deleting c2 and c4 and setting c5 at c1 leaves
// that scan yielding c1..c6 as they were (writes made meanwhile show in
// the next scan only).
func TestAScanReadsItsOwnWritesAsOfItsStart(t *testing.T) {
	for _, page := range []int{1, 2, 3, 256} {
		t.Run(fmt.Sprintf("page=%d", page), func(t *testing.T) {
			db, _ := open(t, &tikvengine.Options{ScanBatchSize: page})
			update(t, db, func(ctx context.Context, tx engine.Txn) error {
				for _, r := range []string{"c1", "c2", "c3", "c4", "c6"} {
					if err := tx.Set("t", []byte(r), colA, []byte("old "+r)); err != nil {
						return err
					}
				}
				return nil
			})
			var during, after []string
			update(t, db, func(ctx context.Context, tx engine.Txn) error {
				during, after = nil, nil
				// Buffered before the scan: seen by it.
				if err := tx.Set("t", []byte("c3"), colA, []byte("new c3")); err != nil {
					return err
				}
				for e, err := range tx.Scan(ctx, engine.ScanOptions{Table: "t"}) {
					if err != nil {
						return err
					}
					during = append(during, string(e.Row)+"="+string(e.Value))
					if string(e.Row) == "c1" {
						for _, w := range []error{
							tx.Delete("t", []byte("c2"), colA),
							tx.Delete("t", []byte("c4"), colA),
							tx.Set("t", []byte("c5"), colA, []byte("new c5")),
						} {
							if w != nil {
								return w
							}
						}
					}
				}
				for e, err := range tx.Scan(ctx, engine.ScanOptions{Table: "t"}) {
					if err != nil {
						return err
					}
					after = append(after, string(e.Row)+"="+string(e.Value))
				}
				return nil
			})
			if want := []string{"c1=old c1", "c2=old c2", "c3=new c3", "c4=old c4", "c6=old c6"}; !slices.Equal(during, want) {
				t.Errorf("the scan during the writes yielded %q, want %q", during, want)
			}
			if want := []string{"c1=old c1", "c3=new c3", "c5=new c5", "c6=old c6"}; !slices.Equal(after, want) {
				t.Errorf("the scan after them yielded %q, want %q", after, want)
			}
		})
	}
}

// TestAnAsOfReadPassedByACollectionWhileItRunsFails: a view of the past
// that another process's collection passes while its fn runs fails with
// ErrSnapshotTooOld once fn returns, though fn read without an error
// (client-go checks reads against a safe point it caches).
func TestAnAsOfReadPassedByACollectionWhileItRunsFails(t *testing.T) {
	db, c := open(t, nil)
	other := openClient(t, c, c.Client(t, nil), nil) // another process
	past := set(t, db, "r", colA, "v1")
	now := set(t, db, "r", colA, "v2")
	if sp := db.SafePoint(); sp != 0 {
		t.Fatalf("safe point %d before any collection", sp)
	}
	var read string
	err := db.Transact(bg, engine.TxnOptions{ReadOnly: true, At: past}, func(ctx context.Context, tx engine.Txn) error {
		if _, err := other.GC(ctx, now+1); err != nil {
			return err
		}
		v, err := tx.Get(ctx, "t", []byte("r"), colA)
		if errors.Is(err, engine.ErrNotFound) {
			return nil
		}
		read = string(v)
		return err
	})
	if !errors.Is(err, engine.ErrSnapshotTooOld) {
		t.Fatalf("a view passed by a collection while it ran: %v (read %q), want ErrSnapshotTooOld", err, read)
	}
}
