package export_test

import (
	"context"
	"fmt"
	"log"

	"github.com/trickle-dev/trickle/framework"
	"github.com/trickle-dev/trickle/framework/export"
	"github.com/trickle-dev/trickle/framework/frameworktest"
)

// A transaction exports what it changes, atomically with the change; the
// queue's observer hands the entries to the sink, here a function.
func ExampleQueue() {
	sink := export.SinkFunc(func(ctx context.Context, queue string, entries []export.Entry) error {
		for _, e := range entries {
			if e.Delete {
				fmt.Printf("%s: delete %s\n", queue, e.Key)
			} else {
				fmt.Printf("%s: %s = %s\n", queue, e.Key, e.Value)
			}
		}
		return nil // the entries leave the queue only now
	})
	q, err := export.New(export.Options{Name: "prices", Buckets: 1, Sink: sink})
	if err != nil {
		log.Fatal(err)
	}
	reg := framework.NewRegistry()
	if err := q.Register(reg); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	env, err := frameworktest.Start(ctx, reg, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer env.Close()

	price := framework.Column{Family: "p", Qualifier: "eur"}
	err = env.DB().Update(ctx, func(ctx context.Context, tx *framework.Txn) error {
		if err := tx.Set("items", []byte("apple"), price, []byte("0.40")); err != nil {
			return err
		}
		if err := q.Add(tx, []byte("apple"), []byte("0.40")); err != nil {
			return err
		}
		if err := tx.Delete("items", []byte("pear"), price); err != nil {
			return err
		}
		return q.Delete(tx, []byte("pear"))
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := env.WaitForObservers(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// prices: apple = 0.40
	// prices: delete pear
}

// A consumer keeps, per key, the entry with the highest sequence number:
// re-delivered and late entries change nothing.
func ExampleTable() {
	t := export.NewTable()
	for _, e := range []export.Entry{
		{Key: []byte("apple"), Seq: 10, Value: []byte("0.40")},
		{Key: []byte("apple"), Seq: 12, Value: []byte("0.45")},
		{Key: []byte("apple"), Seq: 10, Value: []byte("0.40")}, // re-delivered
		{Key: []byte("pear"), Seq: 11, Delete: true},
		{Key: []byte("pear"), Seq: 9, Value: []byte("0.90")}, // older than its deletion
	} {
		fmt.Println(string(e.Key), e.Seq, t.Apply(e))
	}
	for _, k := range t.Keys() {
		v, _ := t.Get(k)
		fmt.Printf("%s = %s\n", k, v)
	}
	// Output:
	// apple 10 true
	// apple 12 true
	// apple 10 false
	// pear 11 true
	// pear 9 false
	// apple = 0.45
}
