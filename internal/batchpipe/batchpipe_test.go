package batchpipe

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// Every batch is worked on and finished, in the order produced.
func TestRunInOrder(t *testing.T) {
	var got []int
	err := Run(context.Background(), func(ctx context.Context, send func([]int) bool) error {
		for i := range 100 {
			if !send([]int{i, 0}) {
				return ctx.Err()
			}
		}
		return nil
	}, func(b []int) { b[1] = b[0] * 2 }, func(b []int) error {
		if b[1] != 2*b[0] {
			t.Errorf("batch %v finished before its work", b)
		}
		got = append(got, b[0])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int, 100)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(got, want) {
		t.Fatalf("finished %v", got)
	}
}

// An error of finish stops the producer and is returned; so is an error
// of produce; a cancelled context stops all three.
func TestRunStops(t *testing.T) {
	errFinish, errProduce := errors.New("finish"), errors.New("produce")
	produced := 0
	err := Run(context.Background(), func(ctx context.Context, send func(int) bool) error {
		for i := 0; ; i++ {
			if !send(i) {
				return nil
			}
			produced++
		}
	}, func(int) {}, func(b int) error {
		if b == 5 {
			return errFinish
		}
		return nil
	})
	if !errors.Is(err, errFinish) || produced > 20 {
		t.Fatalf("%v after %d batches", err, produced)
	}
	err = Run(context.Background(), func(ctx context.Context, send func(int) bool) error {
		send(1)
		return errProduce
	}, func(int) {}, func(int) error { return nil })
	if !errors.Is(err, errProduce) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Run(ctx, func(ctx context.Context, send func(int) bool) error {
		for send(1) {
		}
		return nil
	}, func(int) {}, func(int) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}
