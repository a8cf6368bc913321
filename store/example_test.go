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

// ExampleDB_ReadRows reads a user's balance and the index entry naming
// them in one operation: rows of two tables, from one snapshot, results in
// request order.
func ExampleDB_ReadRows() {
	db, err := store.Open("db", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()
	balance := store.Column{Family: "data", Qualifier: "balance"}
	owner := store.Column{Family: "data", Qualifier: "owner"}
	for _, txn := range []*store.RowTxn{
		{Table: "accounts", Row: []byte("alice"), Mutations: []store.Mutation{{Column: balance, Ts: 10, Value: []byte("100")}}},
		{Table: "by-email", Row: []byte("alice@example.com"), Mutations: []store.Mutation{{Column: owner, Ts: 10, Value: []byte("alice")}}},
	} {
		if _, err := db.Apply(ctx, txn); err != nil {
			panic(err)
		}
	}

	newest := []store.Span{{MaxTs: ^uint64(0), Limit: 1}}
	results, err := db.ReadRows(ctx, []store.RowRead{
		{Table: "by-email", Row: []byte("alice@example.com"), Columns: []store.Column{owner}, Spans: newest},
		{Table: "accounts", Row: []byte("alice"), Columns: []store.Column{balance}, Spans: newest},
		{Table: "accounts", Row: []byte("bob"), Columns: []store.Column{balance}, Spans: newest},
	})
	if err != nil {
		panic(err)
	}
	for i, cells := range results {
		for _, c := range cells {
			fmt.Printf("%d: %s %s = %s\n", i, c.Row, c.Column, c.Value)
		}
		if len(cells) == 0 {
			fmt.Printf("%d: nothing\n", i)
		}
	}
	// Output:
	// 0: alice@example.com data:owner = alice
	// 1: alice data:balance = 100
	// 2: nothing
}
