package percolator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/store"
)

// readCounter counts the store reads a transaction makes.
type readCounter struct {
	store.Store
	readRow, readRows atomic.Int64
}

func (c *readCounter) ReadRow(ctx context.Context, table string, row []byte, cols []store.Column, spans []store.Span) ([]store.Cell, error) {
	c.readRow.Add(1)
	return c.Store.ReadRow(ctx, table, row, cols, spans)
}

func (c *readCounter) ReadRows(ctx context.Context, reads []store.RowRead) ([][]store.Cell, error) {
	c.readRows.Add(1)
	return c.Store.ReadRows(ctx, reads)
}

// Rule: GetRows returns what Get would for every cell — committed values
// short and long, deletions, the transaction's own writes, cells behind a
// lock — and reads the committed ones in one store call (one more for the
// long values), whatever the number of rows.
func TestGetRowsEqualsGet(t *testing.T) {
	e := newEnv(t)
	counter := &readCounter{Store: e.st}
	db, err := New(counter, e.or, &Options{WorkerID: "w", Liveness: e.live, LockTTL: time.Hour, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	row := func(i int) []byte { return []byte(fmt.Sprintf("r%03d", i)) }
	long := strings.Repeat("x", 1000) // past ShortValueMax: a data record
	if err := db.Update(ctx, func(ctx context.Context, tx *Txn) error {
		for i := range 200 {
			v := fmt.Sprint(i)
			if i%7 == 0 {
				v = long + v
			}
			if err := tx.Set("t", row(i), colA, []byte(v)); err != nil {
				return err
			}
			if i%3 == 0 {
				if err := tx.Set("t", row(i), colB, []byte("b"+v)); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(ctx context.Context, tx *Txn) error {
		for i := 0; i < 200; i += 11 {
			if err := tx.Delete("t", row(i), colA); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A transaction of a dead worker left row 5 locked after its commit
	// point: GetRows must roll it forward, as Get does.
	dying := e.db(t, "dying", crashAt(StepCommitted))
	_ = dying.Update(ctx, func(ctx context.Context, tx *Txn) error {
		if err := tx.Set("t", row(4), colB, []byte("primary")); err != nil {
			return err
		}
		return tx.Set("t", row(5), colA, []byte("rolled forward"))
	})
	e.live.Kill("dying")

	var rows [][]byte
	for i := range 210 { // ten rows that do not exist
		rows = append(rows, row(i))
	}
	err = db.View(ctx, func(ctx context.Context, tx *Txn) error {
		counter.readRow.Store(0)
		counter.readRows.Store(0)
		got, err := tx.GetRows(ctx, "t", rows, []Column{colA, colB})
		if err != nil {
			return err
		}
		if n := counter.readRows.Load(); n != 2 {
			t.Errorf("GetRows of %d rows made %d ReadRows calls, want 2 (cells, then long values)", len(rows), n)
		}
		for _, r := range rows {
			for _, c := range []Column{colA, colB} {
				want, werr := tx.Get(ctx, "t", r, c)
				v, ok := got[string(r)][c]
				switch {
				case errors.Is(werr, ErrNotFound):
					if ok {
						t.Errorf("%s %s: GetRows has %q, Get finds nothing", r, c, v)
					}
				case werr != nil:
					return werr
				case !ok || !bytes.Equal(v, want):
					t.Errorf("%s %s: GetRows %q (%v), Get %q", r, c, v, ok, want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Its own writes win over the snapshot.
	err = db.Update(ctx, func(ctx context.Context, tx *Txn) error {
		if err := tx.Set("t", row(1), colA, []byte("mine")); err != nil {
			return err
		}
		if err := tx.Delete("t", row(2), colA); err != nil {
			return err
		}
		got, err := tx.GetRows(ctx, "t", [][]byte{row(1), row(2)}, []Column{colA})
		if err != nil {
			return err
		}
		if string(got["r001"][colA]) != "mine" {
			t.Errorf("own write: %q", got["r001"][colA])
		}
		if _, ok := got["r002"][colA]; ok {
			t.Errorf("own delete still shows %q", got["r002"][colA])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(ctx, func(ctx context.Context, tx *Txn) error {
		_, err := tx.GetRows(ctx, "t", [][]byte{row(1)}, []Column{colA, colA})
		return err
	})
	if !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("a column named twice: %v", err)
	}
}
