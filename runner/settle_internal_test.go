package runner

import (
	"testing"
	"time"
)

// TestSettle drives the decision of when a store has settled after much
// work with a clock of its own: a load issues timestamps, stops, and the
// store is quiet for a window.
func TestSettle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type step struct {
		sec    int
		issued uint64
		want   bool
	}
	for _, tc := range []struct {
		name      string
		after     uint64
		steps     []step
		collected map[int]uint64 // after the step with this index, a collection ran at this count
	}{{
		name:  "a load, then a quiet window",
		after: 1000,
		steps: []step{
			{0, 0, false}, {10, 600, false}, {20, 1500, false}, // loading
			{30, 1500, false}, {40, 1502, false}, // quiet, but not for a whole window yet
			{50, 1505, true}, // quiet since 20 (5 < 1000/100)
		},
	}, {
		name:  "too little work",
		after: 1000,
		steps: []step{{0, 0, false}, {10, 999, false}, {20, 999, false}, {40, 999, false}, {60, 999, false}},
	}, {
		name:  "steady work never settles",
		after: 1000,
		steps: []step{{0, 0, false}, {10, 1000, false}, {20, 2000, false}, {30, 3000, false}, {40, 4000, false}, {50, 5000, false}},
	}, {
		name:  "a hundredth of the threshold in the window is not quiet",
		after: 1000,
		steps: []step{
			{0, 0, false}, {10, 2000, false}, {20, 2005, false}, {30, 2008, false}, {40, 2010, false},
			{50, 2015, false}, // 10 since 20
			{60, 2015, true},  // 7 since 30
		},
	}, {
		name:  "after a collection, the work is counted again from there",
		after: 1000,
		steps: []step{
			{0, 0, false}, {10, 2000, false}, {40, 2000, true},
			{50, 2000, false}, {80, 2500, false}, {120, 2500, false}, // 500 since the collection
			{130, 3100, false}, {160, 3100, true},
		},
		collected: map[int]uint64{2: 2000},
	}, {
		name:  "an oracle that restarts its count starts over",
		after: 1000,
		steps: []step{{0, 5000, false}, {10, 9000, false}, {20, 10, false}, {40, 10, false}, {50, 1500, false}, {80, 1500, true}},
	}, {
		name:  "disabled",
		after: 0,
		steps: []step{{0, 0, false}, {10, 5000, false}, {40, 5000, false}, {80, 5000, false}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := settle{after: tc.after, window: 30 * time.Second}
			for i, st := range tc.steps {
				if got := s.observe(at(st.sec), st.issued); got != st.want {
					t.Fatalf("step %d (%ds, %d issued): settled = %v, want %v", i, st.sec, st.issued, got, st.want)
				}
				if c, ok := tc.collected[i]; ok {
					s.collected(c)
				}
			}
			if len(s.samples) > 10 {
				t.Fatalf("%d samples kept for a 30s window sampled every 10s or more", len(s.samples))
			}
		})
	}
}

func TestSettleTick(t *testing.T) {
	for _, tc := range []struct{ window, interval, want time.Duration }{
		{time.Minute, 10 * time.Minute, 10 * time.Second},
		{10 * time.Minute, 10 * time.Minute, 10 * time.Second},
		{time.Second, 10 * time.Minute, 166666666},
		{time.Millisecond, 10 * time.Minute, 100 * time.Millisecond},
		{time.Minute, 200 * time.Millisecond, 200 * time.Millisecond},
	} {
		if got := settleTick(tc.window, tc.interval); got != tc.want {
			t.Errorf("settleTick(%v, %v) = %v, want %v", tc.window, tc.interval, got, tc.want)
		}
	}
}
