package export_test

import (
	"context"
	"sync"
	"testing"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
)

// Rule: with OrderByKey, two transactions exporting one key and nothing
// else in common conflict, so the one that commits last has the highest
// sequence number and a last-sequence-wins sink keeps its value; without
// it, the first to start commits last and its older sequence number loses
// to the value it overwrote.
func TestOrderByKeyMakesSequenceOrderCommitOrder(t *testing.T) {
	for _, tt := range []struct {
		name    string
		ordered bool
		want    string
	}{
		{"ordered", true, "committed last"},
		{"unordered", false, "committed first"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tab := export.NewTable()
			q, env := start(t, export.Options{OrderByKey: tt.ordered}, tab, nil)
			ctx := context.Background()
			db := env.DB()
			began, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			done := make(chan error, 1)
			go func() {
				done <- db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
					if err := q.Add(tx, []byte("k"), []byte("committed last")); err != nil {
						return err
					}
					once.Do(func() { close(began); <-release }) // the first attempt waits for the other
					return nil
				})
			}()
			<-began
			if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
				return q.Add(tx, []byte("k"), []byte("committed first"))
			}); err != nil {
				t.Fatal(err)
			}
			close(release)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			wait(t, env)
			if got := string(tab.Values()["k"]); got != tt.want {
				t.Errorf("the sink keeps %q, want %q", got, tt.want)
			}
		})
	}
}
