package percolator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Rule: after a commit that left notifications, Options.Notified is given
// the rows they are in, each once, with the columns notified in each:
// rows written in strongly observed columns and rows of weak
// notifications; not rows written only in unobserved columns. Past
// MaxNotifiedRows it is given nil (look everywhere), and a standalone
// NotifyWeak names its row and column.
func TestNotifiedNamesTheNotifiedRows(t *testing.T) {
	e := newEnv(t)
	strong := Column{Family: "f", Qualifier: "strong"}
	weak := Column{Family: "f", Qualifier: "weak"}
	plain := Column{Family: "f", Qualifier: "plain"}
	set := observedMap{{"t", strong}: Strong, {"t", weak}: Weak}
	var calls [][]string
	db := e.db(t, "w", func(o *Options) {
		o.Observed = set
		o.Notified = func(rows []NotifiedRow) {
			if rows == nil {
				calls = append(calls, nil)
				return
			}
			var names []string
			for _, r := range rows {
				var cols []string
				for _, c := range r.Columns {
					cols = append(cols, c.String())
				}
				names = append(names, r.Table+"/"+string(r.Row)+"["+strings.Join(cols, " ")+"]")
			}
			slices.Sort(names)
			calls = append(calls, names)
		}
	})
	ctx := context.Background()
	update := func(fn func(tx *Txn) error) {
		t.Helper()
		if err := db.Update(ctx, func(ctx context.Context, tx *Txn) error { return fn(tx) }); err != nil {
			t.Fatal(err)
		}
	}
	update(func(tx *Txn) error {
		for _, err := range []error{
			tx.Set("t", []byte("a"), strong, []byte("v")),
			tx.Set("t", []byte("a"), plain, []byte("v")), // same row again
			tx.Set("t", []byte("b"), plain, []byte("v")), // not observed
			tx.NotifyWeak("t", []byte("c"), weak),
			tx.NotifyWeak("t", []byte("a"), weak), // a row already named
		} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	update(func(tx *Txn) error { return tx.Set("t", []byte("b"), plain, []byte("w")) })
	update(func(tx *Txn) error {
		for i := range MaxNotifiedRows + 1 {
			if err := tx.Set("t", fmt.Appendf(nil, "r%d", i), strong, []byte("v")); err != nil {
				return err
			}
		}
		return nil
	})
	if err := db.NotifyWeak(ctx, "t", []byte("d"), weak); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"t/a[f:strong f:weak]", "t/c[f:weak]"}, nil, {"t/d[f:weak]"}}
	if len(calls) != len(want) {
		t.Fatalf("Notified called %d times (%q), want %d", len(calls), calls, len(want))
	}
	for i := range want {
		if strings.Join(calls[i], ",") != strings.Join(want[i], ",") || (calls[i] == nil) != (want[i] == nil) {
			t.Errorf("call %d: %q, want %q", i, calls[i], want[i])
		}
	}
}
