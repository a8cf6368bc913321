package framework_test

import (
	"bytes"
	"context"
	"fmt"
	"log"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/frameworktest"
)

// An observer runs, in its own transaction, whenever a transaction writes
// the column it observes; what it writes commits atomically with its own
// bookkeeping, so each change is handled once. Here frameworktest runs the
// registry in process, as a runner would.
func ExampleRegistry_Register() {
	text := framework.Column{Family: "note", Qualifier: "text"}
	shout := framework.Column{Family: "note", Qualifier: "shout"}
	reg := framework.NewRegistry()
	err := reg.Register(framework.Observer{
		Name: "shouter", Table: "notes", Columns: []framework.Column{text}, Kind: framework.Strong,
		Fn: func(ctx context.Context, tx *framework.Txn, row []byte, col framework.Column) error {
			v, err := tx.Get(ctx, "notes", row, col)
			if err != nil {
				return err
			}
			return tx.Set("notes", row, shout, bytes.ToUpper(v))
		},
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	env, err := frameworktest.Start(ctx, reg, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer env.Close()
	db := env.DB()
	if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		return tx.Set("notes", []byte("n1"), text, []byte("hello"))
	}); err != nil {
		log.Fatal(err)
	}
	if err := env.WaitForObservers(ctx); err != nil {
		log.Fatal(err)
	}
	_ = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		v, err := tx.Get(ctx, "notes", []byte("n1"), shout)
		fmt.Println(string(v), err)
		return nil
	})
	// Output: HELLO <nil>
}
