package cluster

import (
	"testing"
	"time"
)

// An outage warns at its first failure and then once per reminder
// interval, whatever the number of attempts, and its end reports the
// failures and how long they lasted; a new outage starts over.
func TestOutageWarnsOncePerReminder(t *testing.T) {
	var o outage
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	if n, _ := o.ok(at(0)); n != 0 {
		t.Fatalf("a success without failures ended an outage of %d failures", n)
	}
	var warned []float64
	for s := 1.0; s <= 25; s += 3 { // an attempt every 3s
		if o.fail(at(s), 10*time.Second) {
			warned = append(warned, s)
		}
	}
	if want := []float64{1, 13, 25}; len(warned) != len(want) || warned[0] != want[0] || warned[1] != want[1] || warned[2] != want[2] {
		t.Fatalf("warned at %v s, want %v", warned, want)
	}
	n, lasted := o.ok(at(28))
	if n != 9 || lasted != 27*time.Second {
		t.Fatalf("outage ended after %d failures and %v, want 9 and 27s", n, lasted)
	}
	if !o.fail(at(30), 10*time.Second) {
		t.Fatal("the first failure after a recovery did not warn")
	}
}
