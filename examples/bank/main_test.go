package main

import (
	"context"
	"testing"
)

// TestBankTwice runs the example twice on the same directory: the second
// run reopens the store and the oracle, finds the accounts, and must again
// end with an unchanged total (run checks it and fails otherwise).
func TestBankTwice(t *testing.T) {
	dir := t.TempDir()
	for range 2 {
		if err := run(context.Background(), dir, 50, 4, 25); err != nil {
			t.Fatal(err)
		}
	}
	if err := run(context.Background(), dir, 1, 1, 1); err == nil {
		t.Fatal("one account accepted")
	}
}
