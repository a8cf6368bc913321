package scanner

import (
	"strings"
	"testing"
	"time"
)

// An idle scanner's pause doubles after every empty pass up to MaxIdleWait,
// and goes back to IdleWait as soon as work is announced (a Wake or a Hint
// during the pause).
func TestPauseGrowsWhileIdleAndResetsWhenWorkIsAnnounced(t *testing.T) {
	const base, max = 100 * time.Millisecond, 1600 * time.Millisecond
	var got []time.Duration
	p := base
	for range 6 {
		p = nextPause(p, false, base, max)
		got = append(got, p)
	}
	want := []time.Duration{200, 400, 800, 1600, 1600, 1600}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("pauses after empty passes: %v, want %v ms", got, want)
		}
	}
	if p = nextPause(p, true, base, max); p != base {
		t.Fatalf("pause after an announcement: %v, want %v", p, base)
	}
}

func TestMaxIdleWaitDefaultsAndBounds(t *testing.T) {
	o := (&Options{Tables: func() []string { return nil }, IdleWait: 50 * time.Millisecond}).EnsureDefaults()
	if o.MaxIdleWait != 800*time.Millisecond {
		t.Errorf("default MaxIdleWait for IdleWait 50ms: %v, want 800ms", o.MaxIdleWait)
	}
	o.MaxIdleWait = 10 * time.Millisecond
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "MaxIdleWait") {
		t.Errorf("MaxIdleWait below IdleWait: %v, want an error naming MaxIdleWait", err)
	}
}
