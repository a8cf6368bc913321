package percolator

import (
	"context"
	"testing"
	"time"
)

// Rule: garbage collection keeps the record of a deletion whose strong
// observer has not seen it yet (the notification is pending), wherever
// the observer runs: the collecting DB need not observe the column
// itself, the columns the runners published count. Other deleted columns
// are collected entirely. Without it, a claim finds no write to tell the
// deletion by and skips the run (see internal/notify).
func TestGCKeepsDeletionsAwaitingTheirObserver(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	watched := Column{Family: "f", Qualifier: "watched"}
	plain := Column{Family: "f", Qualifier: "plain"}
	writer := e.db(t, "writer", func(o *Options) { o.Observed = observing(Strong, "t", watched) })
	collector := e.db(t, "collector", nil) // observes nothing itself
	if err := PublishObserved(ctx, e.st, []ObservedColumn{{Table: "t", Column: watched, Kind: Strong, Observer: "o"}}); err != nil {
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
	e.clock.advance(time.Second)
	st, err := collector.GC(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
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
