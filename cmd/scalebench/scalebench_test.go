package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/trickle-dev/trickle/pipelines/webindex/sample"
)

// The query set is the same for a seed, 1 to 3 distinct words each, all
// among the generator's 25 most frequent.
func TestQuerySet(t *testing.T) {
	a, b := querySet(1, 20), querySet(1, 20)
	if !slices.Equal(a, b) {
		t.Fatal("the query set differs between two runs of one seed")
	}
	if slices.Equal(a, querySet(2, 20)) {
		t.Fatal("two seeds give the same query set")
	}
	frequent := map[string]bool{}
	for r := range 25 {
		frequent[sample.Word(r)] = true
	}
	lengths := map[int]bool{}
	for _, q := range a {
		words := strings.Fields(q)
		lengths[len(words)] = true
		if len(words) < 1 || len(words) > 3 {
			t.Errorf("query %q: %d words", q, len(words))
		}
		for i, w := range words {
			if !frequent[w] || slices.Contains(words[:i], w) {
				t.Errorf("query %q: %q is not a distinct frequent word", q, w)
			}
		}
	}
	if len(lengths) != 3 {
		t.Errorf("query lengths %v: want 1, 2 and 3", lengths)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := percentile(ds, 50); p != 50*time.Millisecond {
		t.Errorf("p50 %v", p)
	}
	if p := percentile(ds, 99); p != 99*time.Millisecond {
		t.Errorf("p99 %v", p)
	}
	if p := percentile(ds[:20], 99); p != 100*time.Millisecond {
		t.Errorf("p99 of 20: %v, want the largest", p)
	}
	if p := percentile(nil, 50); p != 0 {
		t.Errorf("p50 of none: %v", p)
	}
}

// A /proc stat line's CPU is read past a command name holding spaces and
// parentheses.
func TestParseStatCPU(t *testing.T) {
	line := "4242 (run (x) y) S 1 4242 4242 0 -1 4194560 2000 0 0 0 250 75 0 0 20 0 9 0 100 1000 200"
	d, err := parseStatCPU(line)
	if err != nil || d != 3250*time.Millisecond {
		t.Fatalf("%v %v, want 3.25s", d, err)
	}
	if _, err := parseStatCPU("4242 (short) S 1"); err == nil {
		t.Fatal("a short line parsed")
	}
}

func TestParseArgs(t *testing.T) {
	cfg, err := parseArgs([]string{"-pages", "500", "-bulk-memory", "256m"}, io.Discard)
	if err != nil || cfg.pages != 500 || cfg.bulkMemory != "256m" || cfg.queries != 20 || cfg.step != 0.01 {
		t.Fatalf("%+v %v", cfg, err)
	}
	for _, args := range [][]string{{"-pages", "0"}, {"-step", "2"}, {"extra"}} {
		if _, err := parseArgs(args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
