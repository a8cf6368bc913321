package store_test

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/store"
)

// ExampleOpen takes a lock with a conditional mutation: write the lock only
// if no other lock exists, and learn who holds it otherwise.
func ExampleOpen() {
	db, err := store.Open("db", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer db.Close()

	lock := store.Column{Family: "lock", Qualifier: "balance"}
	tryLock := func(owner string, ts uint64) {
		res, err := db.Apply(context.Background(), &store.RowTxn{
			Table: "accounts",
			Row:   []byte("alice"),
			Checks: []store.Check{{
				Column: lock, MaxTs: ^uint64(0), Expect: store.MustBeAbsent,
			}},
			Mutations: []store.Mutation{{Column: lock, Ts: ts, Value: []byte(owner)}},
		})
		if err != nil {
			panic(err)
		}
		if res.Applied {
			fmt.Printf("%s locked the row\n", owner)
		} else {
			fmt.Printf("%s blocked by %s (ts %d)\n", owner, res.Conflict.Value, res.Conflict.Ts)
		}
	}
	tryLock("txn-1", 10)
	tryLock("txn-2", 11)
	// Output:
	// txn-1 locked the row
	// txn-2 blocked by txn-1 (ts 10)
}
