package shouter_test

import (
	"context"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/examples/shouter"
	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
)

// Testing an observer: start it in process, write as a user would, wait
// for the observers, read what they wrote.
func TestShouter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := framework.NewRegistry()
	if err := shouter.Register(reg); err != nil {
		t.Fatal(err)
	}
	env, err := frameworktest.Start(ctx, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	db := env.DB()

	write := func(row, text string) {
		t.Helper()
		err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			if text == "" {
				return tx.Delete(shouter.Table, []byte(row), shouter.Text)
			}
			return tx.Set(shouter.Table, []byte(row), shouter.Text, []byte(text))
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := env.WaitForObservers(ctx); err != nil {
			t.Fatal(err)
		}
	}
	read := func(row string, col framework.Column) string {
		t.Helper()
		var v []byte
		var found bool
		err := db.View(ctx, func(ctx context.Context, tx *framework.Txn) (err error) {
			v, found, err = tx.Lookup(ctx, shouter.Table, []byte(row), col)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			return "<none>"
		}
		return string(v)
	}

	write("n1", "hello")
	if got := read("n1", shouter.Shout); got != "HELLO" {
		t.Fatalf("shout = %q, want HELLO", got)
	}
	write("n1", "hello again")
	if got, edits := read("n1", shouter.Shout), read("n1", shouter.Edits); got != "HELLO AGAIN" || edits != "2" {
		t.Fatalf("after an edit: shout %q, edits %q; want HELLO AGAIN, 2", got, edits)
	}
	// Each change made exactly one run.
	if s := env.Stats(); s.Runs != 2 {
		t.Fatalf("%d observer runs for two changes", s.Runs)
	}
	write("n1", "")
	if got := read("n1", shouter.Shout); got != "<none>" {
		t.Fatalf("after the text was deleted: shout %q", got)
	}
}
