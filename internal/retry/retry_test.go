package retry

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoffGrowsWithinBounds(t *testing.T) {
	lo, hi := 10*time.Millisecond, 80*time.Millisecond
	for attempt := 1; attempt <= 10; attempt++ {
		want := min(lo<<(attempt-1), hi)
		for range 100 {
			if d := Backoff(attempt, lo, hi); d < want/2 || d > want {
				t.Fatalf("attempt %d: %v, want within [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with a cancelled context: %v", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
}

// Rule: Sleep on an ended context fails, however short the pause, so
// that a loop backing off between attempts stops.
func TestSleepOnAnEndedContextFails(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 1000 {
		if err := Sleep(ctx, time.Nanosecond); err != context.Canceled {
			t.Fatalf("Sleep(ended context, 1ns) = %v, want context.Canceled", err)
		}
	}
}
