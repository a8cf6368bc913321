package framework_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/oracle"
	"github.com/trickle-dev/trickle/store"
)

// open sets up an in-memory store and an in-process oracle. A real program
// passes a directory to store.Open and a FilePersister to the oracle, or
// uses a runner (package runner), which does all of it.
func open() (*framework.DB, func()) {
	st, err := store.Open("", framework.StoreOptions(&store.Options{FS: vfs.NewMem()}))
	if err != nil {
		log.Fatal(err)
	}
	ts, err := oracle.NewServer(oracle.NewMemPersister(0), nil)
	if err != nil {
		log.Fatal(err)
	}
	// No observers watch these tables: an empty registry says so.
	db, err := framework.Open(context.Background(), st, ts, &framework.Options{Observers: framework.NewRegistry()})
	if err != nil {
		log.Fatal(err)
	}
	return db, func() { ts.Close(); st.Close() }
}

var balance = framework.Column{Family: "balance", Qualifier: "usd"}

// Update runs a read-modify-write across two rows atomically; on a conflict
// it runs the function again at a new snapshot, so the transfer is never
// applied to stale balances.
func ExampleDB_Update() {
	db, closeAll := open()
	defer closeAll()
	ctx := context.Background()

	_ = db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		if err := tx.Set("accounts", []byte("alice"), balance, []byte("100")); err != nil {
			return err
		}
		return tx.Set("accounts", []byte("bob"), balance, []byte("0"))
	})
	err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		get := func(who string) int {
			v, _ := tx.Get(ctx, "accounts", []byte(who), balance)
			n, _ := strconv.Atoi(string(v))
			return n
		}
		alice, bob := get("alice"), get("bob")
		if err := tx.Set("accounts", []byte("alice"), balance, []byte(strconv.Itoa(alice-30))); err != nil {
			return err
		}
		return tx.Set("accounts", []byte("bob"), balance, []byte(strconv.Itoa(bob+30)))
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: "accounts"}) {
			if err != nil {
				return err
			}
			fmt.Printf("%s %s\n", e.Row, e.Value)
		}
		return nil
	})
	// Output:
	// alice 70
	// bob 30
}

// A transaction sees its own writes, in point reads and in scans, before it
// commits; nobody else does.
func ExampleTxn_Scan() {
	db, closeAll := open()
	defer closeAll()
	ctx := context.Background()
	links := func(target string) framework.Column { return framework.Column{Family: "link", Qualifier: target} }

	err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		_ = tx.Set("pages", []byte("a.example/"), links("b.example/"), []byte("see B"))
		_ = tx.Set("pages", []byte("a.example/"), links("c.example/"), []byte("see C"))
		for e, err := range tx.Scan(ctx, framework.ScanOptions{Table: "pages", Families: []string{"link"}}) {
			if err != nil {
				return err
			}
			fmt.Printf("mine: %s -> %s (%s)\n", e.Row, e.Column.Qualifier, e.Value)
		}
		// Another transaction does not see them until this one commits.
		return db.View(ctx, func(ctx context.Context, other *framework.Txn) error {
			_, found, err := other.Lookup(ctx, "pages", []byte("a.example/"), links("b.example/"))
			fmt.Println("found by another before commit:", found)
			return err
		})
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// mine: a.example/ -> b.example/ (see B)
	// mine: a.example/ -> c.example/ (see C)
	// found by another before commit: false
}

// ViewAt reads the store as it was at a past moment, within what garbage
// collection keeps; TimestampAt turns a time into the snapshot's timestamp.
func ExampleDB_ViewAt() {
	db, closeAll := open()
	defer closeAll()
	ctx := context.Background()
	set := func(usd string) {
		if err := db.Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
			return tx.Set("accounts", []byte("alice"), balance, []byte(usd))
		}); err != nil {
			log.Fatal(err)
		}
	}
	set("100")
	var before uint64
	_ = db.View(ctx, func(ctx context.Context, tx *framework.Txn) error {
		before = tx.StartTs() // or framework.TimestampAt(someTime)
		return nil
	})
	set("70")
	for _, ts := range []uint64{before, framework.TimestampAt(time.Now().Add(-time.Hour))} {
		err := db.ViewAt(ctx, ts, func(ctx context.Context, tx *framework.Txn) error {
			v, found, err := tx.Lookup(ctx, "accounts", []byte("alice"), balance)
			fmt.Printf("found %v %s\n", found, v)
			return err
		})
		if errors.Is(err, framework.ErrSnapshotTooOld) {
			fmt.Println("too old: before the store, or collected since")
		} else if err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// found true 100
	// too old: before the store, or collected since
}
