package loader

import (
	"testing"
	"time"
)

func TestRetryPauseGrowsWithinBounds(t *testing.T) {
	for attempt := 1; attempt <= 10; attempt++ {
		want := min(100*time.Millisecond<<(attempt-1), 2*time.Second)
		for range 100 {
			if d := retryPause(attempt); d < want/2 || d > want {
				t.Fatalf("attempt %d: %v, want within [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
}
