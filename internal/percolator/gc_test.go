package percolator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/internal/protocol"
	"github.com/trickle-dev/trickle/internal/published"
	"github.com/trickle-dev/trickle/store"
)

// Rule: garbage collection keeps the record of a deletion whose strong
// observer has not seen it yet (the notification is pending), wherever
// the observer runs: the collecting DB need not observe the column
// itself, the columns the runners published count. Other deleted columns
// are collected entirely. Without it, a claim finds no write to tell the
// deletion by and skips the run (see framework/notify).
func TestGCKeepsDeletionsAwaitingTheirObserver(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	watched := Column{Family: "f", Qualifier: "watched"}
	plain := Column{Family: "f", Qualifier: "plain"}
	writer := e.db(t, "writer", func(o *Options) { o.Observed = observing(Strong, "t", watched) })
	collector := e.db(t, "collector", nil) // observes nothing itself
	if err := published.Replace(ctx, e.st, []published.Column{{Table: "t", Column: watched, Kind: Strong, Observer: "o"}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, op := range []func(tx *Txn) error{
		func(tx *Txn) error {
			if err := tx.Set("t", []byte("r"), watched, []byte("v")); err != nil {
				return err
			}
			return tx.Set("t", []byte("r"), plain, []byte("v"))
		},
		func(tx *Txn) error {
			if err := tx.Delete("t", []byte("r"), watched); err != nil {
				return err
			}
			return tx.Delete("t", []byte("r"), plain)
		},
	} {
		if err := writer.Update(ctx, func(ctx context.Context, tx *Txn) error { return op(tx) }); err != nil {
			t.Fatal(err)
		}
	}
	st := collectNow(t, e, collector)
	if st.DeletionsKept != 1 {
		t.Errorf("kept %d deletions, want the watched column's", st.DeletionsKept)
	}
	for _, tc := range []struct {
		col  Column
		want int
	}{{watched, 1}, {plain, 0}} {
		cells, err := e.st.ReadRow(ctx, "t", []byte("r"), []Column{tc.col}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(cells) != tc.want {
			t.Errorf("%s: %d versions left, want %d", tc.col, len(cells), tc.want)
		}
	}
}

// Rule: a collection compacts each table it removed at least an eighth
// of the versions of (a queue whose entries were folded, a cell rewritten
// many times), so that reads stop stepping over the tombstones of what it
// removed; a table it barely touched is left to the store's own
// compactions. A store that cannot compact (one reached over a network)
// collects without compacting.
func TestGCCompactsTablesItRemovedMuchOf(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	db := e.db(t, "w", nil)
	c := Column{Family: "f", Qualifier: "q"}
	// "queue": 20 entries written, then all deleted. "index": 100 cells
	// written once, one of them rewritten.
	for _, op := range []func(tx *Txn) error{
		func(tx *Txn) error {
			for i := range 20 {
				if err := tx.Set("queue", fmt.Appendf(nil, "e%02d", i), c, []byte("v")); err != nil {
					return err
				}
			}
			for i := range 100 {
				if err := tx.Set("index", fmt.Appendf(nil, "t%03d", i), c, []byte("v")); err != nil {
					return err
				}
			}
			return nil
		},
		func(tx *Txn) error {
			for i := range 20 {
				if err := tx.Delete("queue", fmt.Appendf(nil, "e%02d", i), c); err != nil {
					return err
				}
			}
			return tx.Set("index", []byte("t000"), c, []byte("w"))
		},
	} {
		if err := db.Update(ctx, func(ctx context.Context, tx *Txn) error { return op(tx) }); err != nil {
			t.Fatal(err)
		}
	}
	st := collectNow(t, e, db)
	if !slices.Equal(st.Compacted, []string{"queue"}) {
		t.Errorf("compacted %q, want the queue only (removed %d versions)", st.Compacted, st.Deleted)
	}

	// The same collection through stores that cannot compact: one that
	// has no such call, one that forwards and answers ErrUnsupported.
	rewrite := func(ctx context.Context, tx *Txn) error {
		for i := range 20 {
			if err := tx.Set("queue", fmt.Appendf(nil, "e%02d", i), c, []byte("again")); err != nil {
				return err
			}
		}
		return nil
	}
	for _, view := range []store.Store{plainStore{e.st}, unsupportedCompactions{e.st}} {
		e.clock.Advance(time.Second)
		for range 2 {
			if err := db.Update(ctx, rewrite); err != nil {
				t.Fatal(err)
			}
		}
		st := collectNow(t, e, e.dbOn(t, view, "collector"))
		if st.Deleted == 0 || len(st.Compacted) > 0 {
			t.Errorf("%T: removed %d versions and compacted %q, want some removed and none compacted", view, st.Deleted, st.Compacted)
		}
	}

	// A compaction that fails fails the collection, naming the table.
	e.clock.Advance(time.Second)
	for range 2 {
		if err := db.Update(ctx, rewrite); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Second)
	_, err := e.dbOn(t, failingCompactions{e.st}, "collector").GC(ctx, 0)
	if !errors.Is(err, errDiskFull) || !strings.Contains(err.Error(), "queue") {
		t.Errorf("collection with a failing compaction: %v, want an error naming the queue and wrapping the store's", err)
	}
}

// failingCompactions is a store whose compactions fail.
type failingCompactions struct{ store.Store }

var errDiskFull = errors.New("disk full")

func (failingCompactions) CompactTable(context.Context, string, string) error { return errDiskFull }

// collectNow collects with db at a fresh timestamp, a second after what
// was written.
func collectNow(t *testing.T, e *env, db *DB) GCStats {
	t.Helper()
	e.clock.Advance(time.Second)
	st, err := db.GC(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// plainStore hides every call of a store but those of store.Store.
type plainStore struct{ store.Store }

// unsupportedCompactions is a store that forwards compactions to a store
// that cannot compact.
type unsupportedCompactions struct{ store.Store }

func (unsupportedCompactions) CompactTable(context.Context, string, string) error {
	return fmt.Errorf("forwarded: %w", errors.ErrUnsupported)
}

// Rule: a collection resolves every lock below its safe point, in every
// table, before it deletes anything. A secondary's fate is read from its
// primary's records: once a newer write covers the primary's commit
// record, the collection removes that record, and a secondary resolved
// after that would be rolled back though its transaction committed.
func TestGCResolvesLocksBeforeDeleting(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	w := committedPrimaryOnly(t, e)
	st := collectNow(t, e, e.db(t, "collector", nil))
	if st.LocksResolved != 1 {
		t.Errorf("resolved %d locks, want the secondary's", st.LocksResolved)
	}
	if got, err := readCol(ctx, w, "b"); err != nil || got != "1" {
		t.Fatalf("the committed transaction's secondary reads %q (%v) after the collection, want \"1\"", got, err)
	}
}

// gcCol is the column of the collection tests' crashed transaction.
var gcCol = Column{Family: "f", Qualifier: "v"}

// committedPrimaryOnly leaves, in table "t", a transaction that committed
// its primary (row "a", which a collection reaches first) and whose
// process ("crashing", reported dead) died before its secondary (row "b"),
// then a later write over the primary's cell, which covers the commit
// record there. It returns the DB of that write.
func committedPrimaryOnly(t *testing.T, e *env) *DB {
	t.Helper()
	ctx := context.Background()
	crashing := e.db(t, "crashing", crashAt(StepCommitted))
	err := crashing.Update(ctx, func(ctx context.Context, tx *Txn) error {
		if err := tx.Set("t", []byte("a"), gcCol, []byte("1")); err != nil {
			return err
		}
		return tx.Set("t", []byte("b"), gcCol, []byte("1"))
	})
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("the crashing commit returned %v, want ErrCrashed", err)
	}
	e.live.Kill("crashing")
	w := e.db(t, "w", nil)
	if err := w.Update(ctx, func(ctx context.Context, tx *Txn) error { return tx.Set("t", []byte("a"), gcCol, []byte("2")) }); err != nil {
		t.Fatal(err)
	}
	return w
}

// readCol reads row's gcCol in table "t" in a read-only transaction of db.
func readCol(ctx context.Context, db *DB, row string) (string, error) {
	var v []byte
	err := db.View(ctx, func(ctx context.Context, tx *Txn) error {
		var err error
		v, err = tx.Get(ctx, "t", []byte(row), gcCol)
		return err
	})
	return string(v), err
}

// Rule: a reader that found a dead transaction's secondary lock before a
// collection resolved it, and reads the primary's records after the
// collection removed the transaction's commit record there, looks at the
// lock again instead of judging the transaction by what is left: it must
// not roll back, on its primary, a transaction that committed.
func TestResolveAfterCollectionRemovedThePrimarysRecord(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	committedPrimaryOnly(t, e)
	e.clock.Advance(time.Second)

	// The reader reads b, finds the lock, and reads the primary's status;
	// right before that read a collection runs at the reader's snapshot.
	collector := e.db(t, "collector", nil)
	var readerStart uint64
	view := &collectBeforeStatus{Store: e.st, row: "a", fn: func() {
		if _, err := collector.GC(ctx, readerStart); err != nil {
			t.Error(err)
		}
	}}
	reader := e.dbOn(t, view, "reader")
	var got []byte
	err := reader.View(ctx, func(ctx context.Context, tx *Txn) error {
		readerStart = tx.StartTs()
		var err error
		got, err = tx.Get(ctx, "t", []byte("b"), gcCol)
		return err
	})
	if err != nil || string(got) != "1" {
		t.Fatalf("b reads %q (%v), want \"1\"", got, err)
	}
	if !view.fired {
		t.Fatal("no collection ran before the reader read the primary's status")
	}
	cells, err := e.st.ReadRow(ctx, "t", []byte("a"), []Column{gcCol}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cell := range cells {
		if kind, ts := protocol.Untag(cell.Ts); kind == protocol.KindRollback {
			t.Errorf("the primary carries a rollback record at %d, of a transaction that committed", ts)
		}
	}
}

// collectBeforeStatus is a store that runs fn once, right before the
// first read of a transaction's status (protocol.StatusSpans) on row.
type collectBeforeStatus struct {
	store.Store
	row   string
	fn    func()
	fired bool
}

func (s *collectBeforeStatus) ReadRow(ctx context.Context, table string, row []byte, cols []Column, spans []store.Span) ([]store.Cell, error) {
	if !s.fired && string(row) == s.row && len(spans) == len(protocol.StatusSpans(0)) {
		s.fired = true
		s.fn()
	}
	return s.Store.ReadRow(ctx, table, row, cols, spans)
}
