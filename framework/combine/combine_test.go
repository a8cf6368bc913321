package combine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/combine"
	"github.com/trickle-dev/trickle/framework/frameworktest"
	"github.com/trickle-dev/trickle/store"
)

var total = framework.Column{Family: "sum", Qualifier: "v"}

// TestConcurrentAddsToAHotRowNeverConflict: many transactions queue
// updates to one row at once; none conflicts (each writes its own cell), and
// once the queue's observer has folded them the value is the exact sum.
//
// The appends' conflicts are counted by how often Update runs its
// function, which it runs again only after a conflict.
func TestConcurrentAddsToAHotRowNeverConflict(t *testing.T) {
	q, env := startQueue(t)
	db := env.DB()

	var wg sync.WaitGroup
	var attempts atomic.Int64
	want := 0
	for g := range 8 {
		want += 25 * (g + 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				err := db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
					attempts.Add(1)
					return q.Add(tx, []byte("hot"), fmt.Sprintf("g%d-%d", g, i), []byte(fmt.Sprint(g+1)))
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := attempts.Load(); n != 8*25 {
		t.Errorf("%d attempts for %d queue appends: %d conflicted", n, 8*25, n-8*25)
	}
	got := settledSum(t, env, "hot")
	queued := 0
	err := db.View(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		for _, err := range tx.Scan(ctx, framework.ScanOptions{Table: "t", Families: []string{"sum.q"}}) {
			if err != nil {
				return err
			}
			queued++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != fmt.Sprint(want) || queued != 0 {
		t.Fatalf("sum %s with %d entries left, want %d and none", got, queued, want)
	}
}

// startQueue runs a summing queue on table t in a fresh deployment.
func startQueue(t *testing.T) (*combine.Queue, *frameworktest.Env) {
	t.Helper()
	q, err := combine.New(combine.Config{Name: "sum", Table: "t", Value: total, Combine: combine.SumInt})
	if err != nil {
		t.Fatal(err)
	}
	reg := framework.NewRegistry()
	if err := q.Register(reg); err != nil {
		t.Fatal(err)
	}
	env, err := frameworktest.Start(context.Background(), reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	return q, env
}

// settledSum waits for the queue's folds and returns the value of row.
func settledSum(t *testing.T, env *frameworktest.Env, row string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := env.WaitForObservers(ctx); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := env.DB().View(ctx, func(ctx context.Context, tx *framework.Txn) (err error) {
		got, err = tx.Get(ctx, "t", []byte(row), total)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return string(got)
}

// Entries are queued in a row per second of their writers' start time, so
// that a fold steps over the folded entries of that second only: over two
// seconds, updates land in two rows, each folded into the one value.
func TestEntriesAreQueuedInARowPerSecond(t *testing.T) {
	q, env := startQueue(t)
	db := env.DB()
	began := time.Now()
	n := 0
	for time.Since(began) < 1100*time.Millisecond || n < 20 {
		if err := db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
			return q.Add(tx, []byte("hot"), fmt.Sprint(n), []byte("1"))
		}); err != nil {
			t.Fatal(err)
		}
		n++
		time.Sleep(10 * time.Millisecond)
	}
	if got := settledSum(t, env, "hot"); got != fmt.Sprint(n) {
		t.Fatalf("sum %s, want %d", got, n)
	}
	if frameworktest.OnTiKV() {
		return // the rows below are read from the store's cells, where TiKV's engine keeps nothing
	}
	rows := map[string]bool{}
	for c, err := range env.Store().Scan(context.Background(), store.ScanRequest{Table: "t", Filter: store.ColumnFilter{Families: []string{"sum.q"}}}) {
		if err != nil {
			t.Fatal(err)
		}
		if string(c.Row) == "hot" && strings.HasPrefix(c.Column.Qualifier, "p/") {
			continue // a second's partial update, folded into the value
		}
		if !strings.HasPrefix(string(c.Row), "hot\x00") || len(c.Row) != len("hot")+9 {
			t.Fatalf("an entry in row %q, want hot followed by a zero byte and a second", c.Row)
		}
		rows[string(c.Row)] = true
	}
	if len(rows) < 2 {
		t.Fatalf("entries of %v in %d row(s), want one row per second", time.Since(began), len(rows))
	}
}

// Entries queued in the value's own row, as before rows per second, are
// folded too.
func TestEntriesInTheValuesRowAreFolded(t *testing.T) {
	q, env := startQueue(t)
	db := env.DB()
	if err := db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		if err := tx.Set("t", []byte("hot"), framework.Column{Family: "sum.q", Qualifier: fmt.Sprintf("%016x/old", tx.StartTs())}, []byte("5")); err != nil {
			return err
		}
		return tx.NotifyWeak("t", []byte("hot"), framework.Column{Family: "sum.q"})
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(context.Background(), func(ctx context.Context, tx *framework.Txn) error {
		return q.Add(tx, []byte("hot"), "new", []byte("2"))
	}); err != nil {
		t.Fatal(err)
	}
	if got := settledSum(t, env, "hot"); got != "7" {
		t.Fatalf("sum %s, want 7", got)
	}
}

// A notification of the per-second column on a row that cannot be a row
// of queued entries fails the fold with an error naming the row, and is
// not taken for a value's row.
func TestFoldOfAMalformedRowFails(t *testing.T) {
	_, env := startQueue(t)
	if err := env.DB().NotifyWeak(context.Background(), "t", []byte("x"), framework.Column{Family: "sum.q", Qualifier: "s"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := env.WaitForObservers(ctx)
	if !errors.Is(err, frameworktest.ErrObserverFailing) || !strings.Contains(err.Error(), `"x" is not a row of queued entries`) {
		t.Fatalf("wait: %v, want the fold failing on row x", err)
	}
}

// TestFoldsOfTwoSecondsOfOneValueDoNotConflict: the rows of two seconds of
// one value are folded by transactions that overlap, the later one
// committing first; neither is run again (they used to collide on the
// value cell, and one retried), and the value is the sum of both.
func TestFoldsOfTwoSecondsOfOneValueDoNotConflict(t *testing.T) {
	q, env := startQueue(t)
	db := env.DB()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	second := func(s byte) []byte { return []byte("hot\x00\x00\x00\x00\x00\x00\x00\x00" + string(s)) }
	// Entries queued as Add queues them, without notifications: only the
	// folds below run on them.
	if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for i, s := range []byte{1, 2} {
			c := framework.Column{Family: "sum.q", Qualifier: fmt.Sprintf("%016x/e%d", tx.StartTs(), i)}
			if err := tx.Set("t", second(s), c, []byte(fmt.Sprint(10*(i+1)))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	bucket := framework.Column{Family: "sum.q", Qualifier: "s"}
	began, laterDone := make(chan struct{}), make(chan error, 1)
	go func() {
		select {
		case <-began:
		case <-ctx.Done():
			laterDone <- ctx.Err()
			return
		}
		laterDone <- db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			return q.Fold(ctx, tx, second(2), bucket)
		})
	}()
	attempts := 0
	err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		attempts++
		if err := q.Fold(ctx, tx, second(1), bucket); err != nil {
			return err
		}
		if attempts == 1 {
			close(began) // this transaction's snapshot is chosen: it read
			if err := <-laterDone; err != nil {
				return fmt.Errorf("the later fold: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 1 {
		t.Errorf("the earlier fold ran %d times: it conflicted with the later one", attempts)
	}
	if got := settledSum(t, env, "hot"); got != "30" {
		t.Fatalf("sum %s, want 30", got)
	}
}

// TestASecondWhoseUpdatesCancelOutLeavesNothing: a second's updates that
// sum to nothing are folded away without a partial update, and the value
// is left as it was.
func TestASecondWhoseUpdatesCancelOutLeavesNothing(t *testing.T) {
	q, env := startQueue(t)
	db := env.DB()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("t", []byte("hot"), total, []byte("7"))
	}); err != nil {
		t.Fatal(err)
	}
	row := []byte("hot\x00\x00\x00\x00\x00\x00\x00\x00\x01")
	if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for i, u := range []string{"5", "-5"} {
			if err := tx.Set("t", row, framework.Column{Family: "sum.q", Qualifier: fmt.Sprintf("%016x/e%d", tx.StartTs(), i)}, []byte(u)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		return q.Fold(ctx, tx, row, framework.Column{Family: "sum.q", Qualifier: "s"})
	}); err != nil {
		t.Fatal(err)
	}
	var left []string
	if err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: "t", Families: []string{"sum.q"}}) {
			if err != nil {
				return err
			}
			left = append(left, fmt.Sprintf("%q %s", e.Row, e.Column))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("cells left after folding updates that cancel out: %v", left)
	}
	if got := settledSum(t, env, "hot"); got != "7" {
		t.Fatalf("sum %s, want 7", got)
	}
}
