package percolator

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/trickle-dev/trickle/internal/published"
	"github.com/trickle-dev/trickle/store"
)

// The rules of guarded cells (see GuardSet): a transaction that writes a
// guarded cell writes its guard too, or writes nothing; a one-phase commit
// checks the guard and not the cell; and two concurrent writers of the
// cell still cannot both commit.

// postings is the guard set of these tests: a cell of family "p" in table
// "idx" (row: a term, qualifier: a document) is guarded by the document's
// state, t/<document>/f:state. With chained, the state is itself guarded
// (a declaration commits refuse).
type postings struct{ chained bool }

var stateCol = col("state")

func (p postings) GuardOf(table string, _ []byte, c Column) (string, []byte, Column, bool) {
	switch {
	case table == "idx" && c.Family == "p":
		return "t", []byte(c.Qualifier), stateCol, true
	case p.chained && table == "t" && c == stateCol:
		return "t", []byte("root"), col("v"), true
	}
	return "", nil, Column{}, false
}

// posting is the guarded cell of term and doc.
func posting(tx *Txn, term, doc, v string) error {
	return tx.Set("idx", []byte(term), Column{Family: "p", Qualifier: doc}, []byte(v))
}

// A guarded cell written without its guard fails the commit, in either
// kind of commit, with nothing written; so does one whose guard is itself
// guarded (even with that guard's guard written: a cycle of guards would
// leave every cell of it unchecked).
func TestGuardedCellWithoutItsGuardIsRefused(t *testing.T) {
	for _, onePhase := range []bool{true, false} {
		for _, chained := range []bool{false, true} {
			t.Run(fmt.Sprintf("onephase=%v/chained=%v", onePhase, chained), func(t *testing.T) {
				e := newEnv(t)
				db := e.db(t, "w", func(o *Options) { o.Guards, o.DisableOnePhase = postings{chained}, !onePhase })
				want := "which the transaction does not write"
				if chained {
					want = "itself a guarded cell"
				}
				err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
					if err := posting(tx, "apple", "d1", "3"); err != nil {
						return err
					}
					if chained {
						if err := tx.Set("t", []byte("root"), col("v"), []byte("r")); err != nil {
							return err
						}
						return tx.Set("t", []byte("d1"), stateCol, []byte("s"))
					}
					return tx.Set("t", []byte("d2"), stateCol, []byte("another document's state"))
				})
				if !errors.Is(err, ErrUnguarded) || !strings.Contains(err.Error(), want) {
					t.Fatalf("commit: %v, want ErrUnguarded saying %q", err, want)
				}
				for _, table := range []string{"idx", "t"} {
					for c, err := range e.st.Scan(context.Background(), store.ScanRequest{Table: table}) {
						if err != nil {
							t.Fatal(err)
						}
						t.Fatalf("the refused commit wrote %s/%q/%s", table, c.Row, c.Column)
					}
				}
			})
		}
	}
}

// A one-phase commit checks the guard and leaves the guarded cells'
// checks out; without the declaration it checks them.
func TestOnePhaseCommitChecksTheGuardOnly(t *testing.T) {
	for _, guards := range []GuardSet{postings{}, nil} {
		e := newEnv(t)
		st := &atomicCounter{DB: e.st.(*store.DB), checks: map[string]int{}}
		db := e.dbWith(t, st, &Options{WorkerID: "w", Logger: quietLogger(), Guards: guards})
		if err := db.Update(context.Background(), func(ctx context.Context, tx *Txn) error {
			for _, term := range []string{"apple", "pear"} {
				if err := posting(tx, term, "d1", "1"); err != nil {
					return err
				}
			}
			return tx.Set("t", []byte("d1"), stateCol, []byte("s"))
		}); err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"idx/apple": 0, "idx/pear": 0, "t/d1": 3}
		if guards == nil {
			want["idx/apple"], want["idx/pear"] = 3, 3
		}
		for row, n := range want {
			if st.checks[row] != n {
				t.Errorf("guards %v: row %s had %d checks, want %d (all: %v)", guards, row, st.checks[row], n, st.checks)
			}
		}
		for _, term := range []string{"apple", "pear"} {
			var v []byte
			if err := db.View(context.Background(), func(ctx context.Context, tx *Txn) (err error) {
				v, err = tx.Get(ctx, "idx", []byte(term), Column{Family: "p", Qualifier: "d1"})
				return err
			}); err != nil || string(v) != "1" {
				t.Fatalf("posting of %s: %q, %v", term, v, err)
			}
		}
	}
}

// A transaction that writes a guarded cell after another transaction
// wrote it (and its guard) since its snapshot fails: in one phase on the
// guard, the guarded cell having no check; in two on whichever cell it
// prewrites first.
func TestGuardedWriteAfterALaterWriteConflictsOnTheGuard(t *testing.T) {
	for _, onePhase := range []bool{true, false} {
		e := newEnv(t)
		ctx := context.Background()
		db := e.db(t, "w", func(o *Options) { o.Guards, o.DisableOnePhase, o.MaxAttempts = postings{}, !onePhase, 1 })
		tx, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Get(ctx, "t", []byte("d1"), stateCol); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
		if err := db.Update(ctx, func(ctx context.Context, other *Txn) error {
			if err := posting(other, "apple", "d1", "theirs"); err != nil {
				return err
			}
			return other.Set("t", []byte("d1"), stateCol, []byte("theirs"))
		}); err != nil {
			t.Fatal(err)
		}
		if err := posting(tx, "apple", "d1", "stale"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Set("t", []byte("d1"), stateCol, []byte("stale")); err != nil {
			t.Fatal(err)
		}
		err = tx.Commit(ctx)
		var ce *ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, ErrWriteConflict) || onePhase && (ce.Table != "t" || ce.Column != stateCol) {
			t.Fatalf("one phase %v: commit after a later write: %v, want a write conflict on the guard", onePhase, err)
		}
	}
}

// Concurrent read-modify-writes of a guarded cell, half of them in one
// phase and half in two, lose no update: each reads the guarded cell (not
// the guard), adds one, and writes both. Were the guard's check left out
// too, two of them could commit over the same snapshot and the counts
// would fall short.
func TestGuardedCounterLosesNoUpdate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const workers, each = 6, 25
	key := Column{Family: "p", Qualifier: "d1"}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		db := e.db(t, fmt.Sprint("w", w), func(o *Options) { o.Guards, o.DisableOnePhase = postings{}, w%2 == 1 })
		wg.Go(func() {
			for range each {
				if err := db.Update(ctx, func(ctx context.Context, tx *Txn) error {
					n := 0
					v, err := tx.Get(ctx, "idx", []byte("apple"), key)
					switch {
					case errors.Is(err, ErrNotFound):
					case err != nil:
						return err
					default:
						if n, err = strconv.Atoi(string(v)); err != nil {
							return err
						}
					}
					s := []byte(strconv.Itoa(n + 1))
					if err := tx.Set("idx", []byte("apple"), key, s); err != nil {
						return err
					}
					return tx.Set("t", []byte("d1"), stateCol, s)
				}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	db := e.db(t, "reader", nil)
	var got, state []byte
	if err := db.View(ctx, func(ctx context.Context, tx *Txn) (err error) {
		if got, err = tx.Get(ctx, "idx", []byte("apple"), key); err != nil {
			return err
		}
		state, err = tx.Get(ctx, "t", []byte("d1"), stateCol)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(workers * each); string(got) != want || string(state) != want {
		t.Fatalf("counter %s, guard %s after %s increments", got, state, want)
	}
}

// A writer that does not know a guard cannot write it, and the one-phase
// commits of the writers that do skip the guarded cell's own check: its
// write would then be lost to theirs. The runners publish their guarded
// families; a DB that does not know a published family's guard refuses to
// write its cells, in either kind of commit, with nothing written, while
// the declaring writer's commit goes through.
func TestAWriterWithoutTheGuardRefusesAPublishedGuardedFamily(t *testing.T) {
	ctx := context.Background()
	for _, onePhase := range []bool{true, false} {
		t.Run(fmt.Sprintf("onephase=%v", onePhase), func(t *testing.T) {
			e := newEnv(t)
			if err := published.Replace(ctx, e.st, nil, []published.Guarded{{Table: "idx", Family: "p"}}); err != nil {
				t.Fatal(err)
			}
			ps, err := published.Load(ctx, e.st)
			if err != nil {
				t.Fatal(err)
			}
			declaring := e.db(t, "declaring", func(o *Options) { o.Guards, o.DeclaredGuards = postings{}, ps })
			unaware := e.db(t, "unaware", func(o *Options) { o.DeclaredGuards, o.DisableOnePhase = ps, !onePhase })

			running, err := declaring.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := running.Get(ctx, "idx", []byte("apple"), Column{Family: "p", Qualifier: "d1"}); !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			err = unaware.Update(ctx, func(ctx context.Context, tx *Txn) error { return posting(tx, "apple", "d1", "unaware") })
			if !errors.Is(err, ErrUnguarded) || !strings.Contains(err.Error(), "does not know its guard") {
				t.Fatalf("a writer that does not know the guard wrote a published guarded family: %v", err)
			}
			// Its other cells are its own business.
			if err := unaware.Update(ctx, func(ctx context.Context, tx *Txn) error { return tx.Set("t", []byte("d1"), col("v"), []byte("x")) }); err != nil {
				t.Fatal(err)
			}
			if err := posting(running, "apple", "d1", "declaring"); err != nil {
				t.Fatal(err)
			}
			if err := running.Set("t", []byte("d1"), stateCol, []byte("s")); err != nil {
				t.Fatal(err)
			}
			if err := running.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if err := declaring.View(ctx, func(ctx context.Context, tx *Txn) error {
				v, err := tx.Get(ctx, "idx", []byte("apple"), Column{Family: "p", Qualifier: "d1"})
				if err != nil || string(v) != "declaring" {
					t.Errorf("the posting reads %q %v", v, err)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
